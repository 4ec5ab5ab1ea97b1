//! Executes the steps of one compound operation against an [`ObjectView`]. Pure with
//! respect to IO beyond the view's reads: the caller decides whether to commit.

use crate::limits::Limits;
use crate::view::ObjectView;
use bytes::Bytes;
use shoal_objclass::{ClassRegistry, MethodContext, ObjectAccess};
use shoal_types::{ClientId, CmpMode, CmpOp, Result, Step, StepOutput, err};

/// Who runs the operation and when.
pub struct ExecEnv<'a> {
    /// Object classes available to `Exec` steps.
    pub classes: &'a ClassRegistry,
    /// Operation limits.
    pub limits: &'a Limits,
    /// The client that sent the operation.
    pub caller: ClientId,
    /// The OSD's clock at the start of the operation, ns since the epoch.
    pub now_ns: u64,
}

/// Runs every step in order; the first failure aborts the operation (nothing is applied
/// by the caller) and is returned as is.
pub fn execute(view: &mut ObjectView<'_>, steps: &[Step], env: &ExecEnv<'_>) -> Result<Vec<StepOutput>> {
    if steps.len() > env.limits.max_ops_per_request {
        return Err(err::too_big(format!(
            "{} steps in one operation; osd_max_ops_per_request is {}",
            steps.len(),
            env.limits.max_ops_per_request
        )));
    }
    steps.iter().map(|step| execute_step(view, step, env)).collect()
}

fn compare(stored: &[u8], op: CmpOp, mode: CmpMode, given: &[u8]) -> Result<bool> {
    let ordering = match mode {
        CmpMode::Bytes => stored.cmp(given),
        CmpMode::U64 => parse_u64(stored)?.cmp(&parse_u64(given)?),
    };
    Ok(op.holds(ordering))
}

fn parse_u64(bytes: &[u8]) -> Result<u64> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| err::invalid(format!("{:?} is not a decimal u64", String::from_utf8_lossy(bytes))))
}

fn execute_step(view: &mut ObjectView<'_>, step: &Step, env: &ExecEnv<'_>) -> Result<StepOutput> {
    let none = |r: Result<()>| r.map(|()| StepOutput::None);
    match step {
        Step::Create { exclusive } => none(view.create(*exclusive)),
        Step::Write { offset, data } => none(view.write(*offset, data)),
        Step::WriteFull { data } => none(view.write_full(data)),
        Step::Append { data } => none(view.append(data)),
        Step::Truncate { size } => none(view.truncate(*size)),
        Step::Zero { offset, length } => none(view.zero(*offset, *length)),
        Step::Remove => none(view.remove()),
        Step::SetXattr { name, value } => none(view.set_xattr(name, value.clone())),
        Step::RmXattr { name } => none(view.rm_xattr(name)),
        Step::OmapSet { entries } => none(view.omap_set(entries.iter().map(|(k, v)| (k.clone(), v.clone())).collect())),
        Step::OmapRmKeys { keys } => none(view.omap_rm_keys(keys)),
        Step::OmapRmRange { start, end } => none(view.omap_rm_range(start, end)),
        Step::OmapClear => none(view.omap_clear()),
        Step::OmapSetHeader { header } => none(view.omap_set_header(header.clone())),
        Step::AssertExists => {
            if view.exists()? {
                Ok(StepOutput::None)
            } else {
                Err(err::not_found("assert_exists: no such object"))
            }
        }
        Step::AssertVersion { version } => {
            if *version == 0 {
                return Err(err::invalid("assert_version: version 0 is never valid"));
            }
            let current = view.stat()?.version;
            match current.cmp(version) {
                std::cmp::Ordering::Equal => Ok(StepOutput::None),
                std::cmp::Ordering::Greater => {
                    Err(err::range(format!("assert_version {version}: object is at newer version {current}")))
                }
                std::cmp::Ordering::Less => {
                    Err(err::overflow(format!("assert_version {version}: object is at older version {current}")))
                }
            }
        }
        Step::CmpXattr { name, op, mode, value } => {
            let stored = view.get_xattr(name)?;
            let holds = match (stored, mode) {
                (None, CmpMode::U64) => false,
                (stored, _) => compare(stored.as_deref().unwrap_or_default(), *op, *mode, value)?,
            };
            if holds { Ok(StepOutput::None) } else { Err(err::canceled(format!("cmpxattr '{name}' {op:?} failed"))) }
        }
        Step::OmapCmp { assertions } => {
            view.stat()?;
            for (key, (op, mode, value)) in assertions {
                let holds = match view.omap_get(key)? {
                    Some(stored) => compare(&stored, *op, *mode, value)?,
                    None => false,
                };
                if !holds {
                    return Err(err::canceled(format!(
                        "omap_cmp on key {:?} {op:?} failed",
                        String::from_utf8_lossy(key)
                    )));
                }
            }
            Ok(StepOutput::None)
        }
        Step::Read { offset, length } => view.read(*offset, *length).map(StepOutput::Data),
        Step::Stat => view.stat().map(StepOutput::Stat),
        Step::GetXattr { name } => match view.get_xattr(name)? {
            Some(v) => Ok(StepOutput::Data(v)),
            None => Err(err::no_data(format!("no xattr '{name}'"))),
        },
        Step::GetXattrs => view.get_xattrs().map(StepOutput::Xattrs),
        // Read by the primary before it commits (see `Step::may_run_when_full`).
        Step::FullTry => Ok(StepOutput::None),
        Step::OmapGetKeys { start_after, filter_prefix, max_return } => {
            let max = (*max_return).min(env.limits.max_omap_entries_per_request) as usize;
            let (entries, more) = view.omap_get_vals(start_after, filter_prefix, max)?;
            Ok(StepOutput::OmapKeys { keys: entries.into_iter().map(|(k, _)| k).collect(), more })
        }
        Step::OmapGetVals { start_after, filter_prefix, max_return } => {
            let max = (*max_return).min(env.limits.max_omap_entries_per_request) as usize;
            let (entries, more) = view.omap_get_vals(start_after, filter_prefix, max)?;
            Ok(StepOutput::OmapVals { entries, more })
        }
        Step::OmapGetValsByKeys { keys } => {
            let mut entries = Vec::new();
            for k in keys {
                if let Some(v) = view.omap_get(k)? {
                    entries.push((k.clone(), v));
                }
            }
            Ok(StepOutput::OmapVals { entries, more: false })
        }
        Step::OmapGetHeader => view.omap_get_header().map(StepOutput::Data),
        Step::Checksum { offset, length, init } => {
            let data = view.read(*offset, *length)?;
            Ok(StepOutput::Checksum(crc32c::crc32c_append(*init, &data)))
        }
        Step::Exec { class, method, input } => {
            let m = env.classes.lookup(class, method)?;
            let before = view.changes();
            let mut ctx = MethodContext { object: view, caller: env.caller, now_ns: env.now_ns };
            let out = (m.func)(&mut ctx, input)?;
            if !m.flags.write && view.changes() != before {
                return Err(err::io(format!("read-only method {class}.{method} tried to change the object")));
            }
            Ok(StepOutput::Data(Bytes::from(out)))
        }
    }
}
