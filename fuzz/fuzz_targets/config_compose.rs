//! rlprof-config: YAML, the Hydra override grammar and OmegaConf interpolation, the
//! way `rlprof config show` composes them. The input is YAML text, then a NUL byte, then
//! overrides one per line; the composed tree is shown and built into a plan.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rlprof_config::{self as config, Selection};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (yaml, rest) = text.split_once('\0').unwrap_or((&text, ""));
    let overrides: Vec<String> = rest
        .split('\n')
        .filter(|l| !l.is_empty())
        .take(16)
        .map(str::to_string)
        .collect();
    let sel = Selection::default();
    if let Ok(c) = config::compose_config(&sel, Some((yaml, "<fuzz>")), &overrides) {
        let _ = config::show_json(&c.tree);
        let _ = config::show_yaml(&c.tree);
        if let Ok(plan) = config::build_plan_composed(&c.tree, &c.written) {
            let _ = config::plan_json(&plan);
            let _ = config::describe(&plan);
        }
    }
});
