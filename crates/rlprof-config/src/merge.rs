//! OmegaConf's merge (`OmegaConf.merge(dest, src)`), used to compose configs and to apply
//! dict-valued overrides: mappings merge key by key, everything else replaces, and `???` in the
//! source keeps the destination's value.

use super::tree::{Map, Node};

/// Merges `src` into `dest`.
pub(super) fn merge(dest: &mut Node, src: Node) {
    match (dest, src) {
        (Node::Map(d), Node::Map(s)) => merge_maps(d, s),
        (_, s) if s.is_missing() => {}
        (d, s) => *d = s,
    }
}

fn merge_maps(d: &mut Map, s: Map) {
    for (k, v) in s {
        match d.get_mut(&k) {
            Some(existing) => merge(existing, v),
            None => {
                d.insert(k, v);
            }
        }
    }
}

/// `content` placed at the dotted `package` (empty = root).
pub(super) fn at_package(package: &str, content: Node) -> Node {
    let mut node = content;
    for seg in package.split('.').filter(|s| !s.is_empty()).rev() {
        let mut m = Map::new();
        m.insert(seg.to_string(), node);
        node = Node::Map(m);
    }
    node
}
