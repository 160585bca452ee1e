//! What keel's commands did to the files its file tools also changed, as steps a rewind can
//! put in one line with the file tools' checkpoints.
//!
//! A path a command changed and a file tool changed too (either first) has two records: the
//! file tool's checkpoint (its pre-image and what it left) and the command's bracket of git
//! snapshots (the path before and after the command). A rewind needs the earliest state of
//! the path and the chain of keel's own changes, so a change by anyone else shows as a gap.
//!
//! Invariants:
//! - A step stands for one bracket that changed the path, at the bracket's first receipt:
//!   file tools and commands never run in one batch, so receipt order is the order of change.
//! - A step is shaped like a checkpoint (content hashes, `absent`, or why it is not kept), so
//!   the rewind's one conflict rule covers both; the bytes a step would restore are carried
//!   with it, never stored.
//! - Only brackets keel closed count; a bracket left open is a gap the chain reports.

use crate::checkpoint::MOST_KEPT_BYTES;
use crate::snapshot::{Point, Side, Snapshots};
use keel_store::Checkpoint;
use keel_types::ToolReceipt;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// The steps of commands on checkpointed paths, and what their pre-images hold.
#[derive(Debug, Default)]
pub(crate) struct CommandSteps {
    /// Per path (as the checkpoints name it): the commands' steps, in order.
    pub steps: BTreeMap<String, Vec<Checkpoint>>,
    /// Per (path, step): the bytes the step's pre-image holds, and whether it was executable.
    pub contents: HashMap<(String, u64), (Vec<u8>, bool)>,
}

/// The steps of the commands bracketed from receipt `first_seq` on, on `paths`.
pub(crate) fn command_steps<'a>(
    snapshots: &Snapshots,
    first_seq: u64,
    receipts: &[ToolReceipt],
    paths: impl Iterator<Item = &'a String>,
) -> Result<CommandSteps, String> {
    let mut found = CommandSteps::default();
    let by_relative: BTreeMap<Vec<u8>, &String> = paths
        .filter_map(|path| Some((snapshots.relative(Path::new(path))?, path)))
        .collect();
    if by_relative.is_empty() {
        return Ok(found);
    }
    let relatives: Vec<Vec<u8>> = by_relative.keys().cloned().collect();
    let points: Vec<Point> = snapshots
        .points()?
        .into_iter()
        .filter(|point| point.first >= first_seq)
        .collect();
    for pair in points.windows(2) {
        let [before, after] = pair else { continue };
        let closed = before.side == Side::Before
            && after.side == Side::After
            && (before.first, before.last) == (after.first, after.last);
        if !closed {
            continue;
        }
        let Some(receipt) = receipts.iter().find(|receipt| receipt.seq == before.first) else {
            continue;
        };
        for change in snapshots.changed_among(&before.tree, &after.tree, &relatives)? {
            let Some(path) = by_relative.get(&change.path) else {
                continue;
            };
            let kept_as = ((*path).clone(), before.first);
            let (state, hash) = found.entry(snapshots, change.before.as_ref(), Some(kept_as))?;
            let (_, left) = found.entry(snapshots, change.after.as_ref(), None)?;
            found
                .steps
                .entry((*path).clone())
                .or_default()
                .push(Checkpoint {
                    seq: before.first,
                    turn: receipt.turn,
                    call_id: receipt.call_id.clone(),
                    path: (*path).clone(),
                    state,
                    hash,
                    after: Some(left),
                    undone: false,
                });
        }
    }
    Ok(found)
}

impl CommandSteps {
    /// A snapshot's entry as a checkpoint names it: (state, content hash), keeping the bytes
    /// under `kept_as` (a pre-image). What is not a regular file is named the way
    /// `current_hash` names it on disk.
    fn entry(
        &mut self,
        snapshots: &Snapshots,
        entry: Option<&(String, String)>,
        kept_as: Option<(String, u64)>,
    ) -> Result<(String, Option<String>), String> {
        let Some((mode, id)) = entry else {
            return Ok(("absent".into(), None));
        };
        let other = match mode.as_str() {
            "100644" | "100755" => None,
            "120000" => Some("a link"),
            _ => Some("a directory"),
        };
        if let Some(what) = other {
            return Ok((
                format!("it was {what} before a command changed it; keel does not restore those"),
                Some(format!("({what})")),
            ));
        }
        let bytes = snapshots.blob(id)?;
        if bytes.len() as u64 > MOST_KEPT_BYTES {
            return Ok((
                format!("larger than {MOST_KEPT_BYTES} bytes before a command changed it"),
                Some(format!("(large file: {} bytes)", bytes.len())),
            ));
        }
        let hash = keel_store::content_hash(&bytes);
        if let Some(key) = kept_as {
            self.contents
                .insert(key, (bytes, mode.as_str() == "100755"));
        }
        Ok(("stored".into(), Some(hash)))
    }
}
