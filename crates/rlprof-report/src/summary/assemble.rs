//! [`summarise`]: the report of loaded profiles, each summarised on its own in parallel
//! ([`super::digest`]) and merged; [`summarise_path`]: the same report of a path, each input
//! read, summarised and dropped in turn, so that memory holds the digests and the inputs being
//! read, not the whole tree.

use super::Report;
use super::digest::{Digest, digest, merge};
use crate::Limits;
use crate::discover::{Item, Outcome};
use crate::error::ReportError;
use crate::model::{Loaded, Profile, Skipped};
use rayon::prelude::*;
use std::path::Path;

/// Builds the report of loaded profiles.
pub fn summarise(loaded: &Loaded) -> Report {
    let digests: Vec<Digest> = loaded.profiles.par_iter().map(digest).collect();
    merge(digests, loaded.skipped.clone(), loaded.notes.clone())
}

/// Which profiles [`summarise_path`] keeps besides their digests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// None: each input is dropped once summarised (text, JSON).
    None,
    /// None, and not the producers' own tables of each input either (the cluster view, which
    /// shows neither: a text-layout rank's CANN tables are most of its digest).
    FiguresOnly,
    /// All of them, when there are at most this many inputs (a page's timelines then need no
    /// second read); else none, and a page reads again the inputs it shows
    /// ([`Summarised::profile`]).
    UpTo(usize),
}

/// The report of a path, with what is needed to read its inputs again.
#[derive(Debug)]
pub struct Summarised {
    /// The report.
    pub report: Report,
    /// Per input (the report's `profile` index): the profile without its events, and
    /// what its timeline holds.
    pub inputs: Vec<SummarisedInput>,
    /// Limits the inputs were read with.
    limits: Limits,
}

/// One input of a [`Summarised`] report.
#[derive(Debug)]
pub struct SummarisedInput {
    /// The profile without its events ([`Digest::light`]).
    pub light: Profile,
    /// Its content events.
    pub content_events: usize,
    /// How it was read.
    task: crate::discover::Task,
    /// The profile itself, when kept.
    full: Option<Profile>,
}

impl Summarised {
    /// Input `i`'s profile: the one kept, else read again (an input that changed since, or
    /// can no longer be read, is an error).
    pub fn profile(&self, i: usize) -> Result<std::borrow::Cow<'_, Profile>, ReportError> {
        let input = &self.inputs[i];
        if let Some(p) = &input.full {
            return Ok(std::borrow::Cow::Borrowed(p));
        }
        match input.task.load(&self.limits) {
            Outcome::Profile(p) if p.rank == input.light.rank => Ok(std::borrow::Cow::Owned(*p)),
            Outcome::Skipped(s) => Err(ReportError::Malformed {
                path: s.path,
                message: format!("read again for the page: {}", s.reason),
            }),
            _ => Err(ReportError::Malformed {
                path: input.task.path().to_path_buf(),
                message: "changed since it was summarised".into(),
            }),
        }
    }
}

/// The report of everything under `path`, as [`summarise`] of [`crate::load`] gives it, with
/// each input dropped once summarised (unless `keep` says otherwise). Inputs are read in
/// parallel, one per thread at a time. Fails only when nothing at all could be loaded.
pub fn summarise_path(path: &Path, limits: &Limits, keep: Keep) -> Result<Summarised, ReportError> {
    let items = crate::discover::find(path)?;
    let tasks = items.iter().filter(|i| matches!(i, Item::Task(_))).count();
    let keep_all = matches!(keep, Keep::UpTo(n) if tasks <= n);
    enum Done {
        Profile(Box<(Digest, crate::discover::Task, Option<Profile>)>),
        Skipped(Skipped),
        Note(String),
        Nothing,
    }
    let done: Vec<Done> = items
        .into_par_iter()
        .with_max_len(1)
        .map(|item| match item {
            Item::Task(t) => match t.load(limits) {
                Outcome::Profile(p) => {
                    let mut d = digest(&p);
                    if keep == Keep::FiguresOnly {
                        d.drop_tables();
                    }
                    Done::Profile(Box::new((d, t, keep_all.then_some(*p))))
                }
                Outcome::Skipped(s) => Done::Skipped(s),
                Outcome::Note(n) => Done::Note(n),
                Outcome::Nothing => Done::Nothing,
            },
            Item::Skipped(s) => Done::Skipped(s),
            Item::Note(n) => Done::Note(n),
        })
        .collect();
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    let mut notes = Vec::new();
    for d in done {
        match d {
            Done::Profile(b) => found.push(*b),
            Done::Skipped(s) => skipped.push(s),
            Done::Note(n) => notes.push(n),
            Done::Nothing => {}
        }
    }
    found.sort_by(|a, b| crate::discover::load_order(&a.0.light, &b.0.light));
    let fps: Vec<(u64, &Path)> = found
        .iter()
        .map(|(d, _, _)| (d.fingerprint, d.light.source.as_path()))
        .collect();
    let (keep_flags, dup_notes) = crate::discover::duplicates(&fps);
    notes.extend(dup_notes);
    let mut keep_flags = keep_flags.into_iter();
    found.retain(|_| keep_flags.next().unwrap_or(true));
    if found.is_empty() {
        return Err(crate::discover::nothing_found(path, &skipped));
    }
    let mut digests = Vec::with_capacity(found.len());
    let mut inputs = Vec::with_capacity(found.len());
    for (d, task, full) in found {
        inputs.push(SummarisedInput {
            light: super::digest::light(&d.light),
            content_events: d.content_events,
            task,
            full,
        });
        digests.push(d);
    }
    Ok(Summarised {
        report: merge(digests, skipped, notes),
        inputs,
        limits: *limits,
    })
}
