//! Readers shared by the `global_profiler` and role blocks: verl's finish-hook keys, rank
//! lists, schedules and positive `u32` values.

use super::raw::Hooks;
use super::schema::SCHEDULE_KEYS;
use crate::tree::{Map, Node};
use crate::typed::{self, Reader};
use rlprof_profiler::plan::Schedule;

/// verl's `relocate_results`, `finish_hook_cmd`, `finish_hook_all_ranks`, `finish_hook_ranks`.
pub(super) fn parse_hooks(
    cx: &mut Reader,
    m: &Map,
    path: &str,
    world: u32,
    warnings: &mut Vec<String>,
) -> Hooks {
    let cmd = match m.get("finish_hook_cmd") {
        None => None,
        Some(Node::Null) => Some(None),
        Some(_) => cx.str_in(m, "finish_hook_cmd", path).map(Some),
    };
    Hooks {
        relocate_results: cx.bool_in(m, "relocate_results", path),
        cmd,
        all_ranks: cx.bool_in(m, "finish_hook_all_ranks", path),
        ranks: rank_list(cx, m, "finish_hook_ranks", path, world, warnings),
    }
}

/// A role's finish hook: its command and ranks (verl: `finish_hook_all_ranks`, else
pub(super) fn pos_u32(cx: &mut Reader, m: &Map, key: &str, path: &str) -> Option<u32> {
    let v = cx.pos_int_in(m, key, path)?;
    match u32::try_from(v) {
        Ok(v) => Some(v),
        Err(_) => {
            cx.err(
                &format!("{path}.{key}"),
                format!(
                    "{v} is too large; expected an integer between 1 and {}",
                    u32::MAX
                ),
            );
            None
        }
    }
}

/// A list of ranks (`ranks`, `finish_hook_ranks`). A rank at or above the world size is
/// accepted with a warning, as verl 0.9.1 accepts it (no process has it, so it selects nothing);
/// a negative or non-integer rank is an error.
pub(super) fn rank_list(
    cx: &mut Reader,
    m: &Map,
    key: &str,
    path: &str,
    world: u32,
    warnings: &mut Vec<String>,
) -> Option<Vec<u32>> {
    let v = Reader::entry(m, key)?;
    let p = format!("{path}.{key}");
    let Node::List(seq) = v else {
        cx.err(
            &p,
            format!(
                "{} is {}, expected a list of ranks in 0..{} (e.g. [0]) or all_ranks: true",
                v.show(),
                typed::kind(v),
                world.saturating_sub(1)
            ),
        );
        return None;
    };
    let mut out = Vec::new();
    for (i, item) in seq.iter().enumerate() {
        let ip = format!("{p}[{i}]");
        match typed::as_int(item) {
            Some(r) if r >= 0 && r < world as i64 => out.push(r as u32),
            Some(r) if r >= 0 => warnings.push(format!(
                "{ip}: rank {r} is >= world size {world} (trainer.nnodes * trainer.n_gpus_per_node), so no process has it and it selects nothing; verl 0.9.1 accepts it the same way (ranks are 0..{})",
                world - 1
            )),
            _ => cx.err(
                &ip,
                format!(
                    "{} is not a valid rank; valid ranks are integers 0..{} (world size {world})",
                    item.show(),
                    world - 1
                ),
            ),
        }
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// Parses `m.schedule` (absent or null = none). `active` must be >= 1.
pub(super) fn parse_schedule(cx: &mut Reader, m: &Map, parent: &str) -> Option<Schedule> {
    let p = format!("{parent}.schedule");
    let s = cx.map(m.get("schedule"), &p)?;
    cx.check_keys(s, &p, SCHEDULE_KEYS);
    let mut field = |key: &str, dflt: u64| match cx.int_in(s, key, &p) {
        Some(v) if v < 0 => {
            cx.err(
                &format!("{p}.{key}"),
                format!("{v} is negative; give a count >= 0"),
            );
            dflt
        }
        Some(v) => v as u64,
        None => dflt,
    };
    let sched = Schedule {
        skip_first: field("skip_first", 0),
        wait: field("wait", 0),
        warmup: field("warmup", 0),
        active: field("active", 1),
        repeat: field("repeat", 1),
    };
    if sched.active == 0 {
        cx.err(
            &format!("{p}.active"),
            "0 would record nothing; give the number of iterations to record (>= 1)",
        );
        return None;
    }
    Some(sched)
}
