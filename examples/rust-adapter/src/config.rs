//! What this adapter declares, chosen on the command line.
//!
//! The declaration of the `hello` answer (contract "Declarations (hello
//! answer)") is fixed for the life of the process: the format versions
//! written and read, the `profile_v2_revision` and `plan_key_window`
//! options, and six options of the class `prefix_cache`. Nothing else is
//! configurable.
//!
//! ```text
//! --writes 1|2                          the version stamped (default 1)
//! --reads 1,2                           the versions read (default: the one written)
//! --v2-revision split_width|layout_only (default split_width)
//! --plan-key-window keyed|structure     (default keyed)
//! --prefix-partial none|tokens|exact_tail (default none)
//! --prefix-salt-scope root|every_block  (default every_block)
//! --prefix-adapter-identity instance|content (default instance)
//! --prefix-media-identity content|caller     (default content)
//! --prefix-empty-salt distinct|refuse        (default distinct)
//! --prefix-tier-layout keyed|converted       (default keyed)
//! ```
//!
//! Each flag takes its value as the next argument or after `=`
//! (`--writes=2`). A flag given twice, an unknown flag or value, or a readable
//! set that leaves out the written version is refused.

use crate::prefix::{
    self, AdapterIdentity, Choices, EmptySalt, MediaIdentity, Partial, SaltScope, TierLayout,
};
use crate::signature::{Profile, Revision, DEFINED_VERSIONS};

/// How a model parameter named `sliding_window` enters the plan key
/// (contract: option `plan_key_window`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WindowKeying {
    /// Seed 0.19.1: keyed like any other parameter.
    #[default]
    Keyed,
    /// Later fuel: the window width is per-step data, so the parameter named
    /// exactly `sliding_window` is left out of the key (and so of validity).
    Structure,
}

impl WindowKeying {
    pub fn name(self) -> &'static str {
        match self {
            WindowKeying::Keyed => "keyed",
            WindowKeying::Structure => "structure",
        }
    }
}

/// The whole declaration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub profile: Profile,
    pub window_keying: WindowKeying,
    pub prefix: prefix::Options,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            profile: Profile::v1(),
            window_keying: WindowKeying::Keyed,
            prefix: prefix::Options::default(),
        }
    }
}

/// What the command line asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Invocation {
    Serve(Config),
    Help,
}

pub const USAGE: &str = "usage: kvconform-rust-adapter [--writes 1|2] [--reads 1,2] \
[--v2-revision split_width|layout_only] [--plan-key-window keyed|structure] \
[--prefix-partial none|tokens|exact_tail] [--prefix-salt-scope root|every_block] \
[--prefix-adapter-identity instance|content] [--prefix-media-identity content|caller] \
[--prefix-empty-salt distinct|refuse] [--prefix-tier-layout keyed|converted]";

/// Read the flags (without the program name). An `Err` is the one line to
/// print before exiting with status 2.
pub fn parse_args<I>(args: I) -> Result<Invocation, String>
where
    I: IntoIterator<Item = String>,
{
    let mut writes: Option<u64> = None;
    let mut reads: Option<Vec<u64>> = None;
    let mut revision: Option<Revision> = None;
    let mut keying: Option<WindowKeying> = None;
    let mut partial: Option<Partial> = None;
    let mut salt_scope: Option<SaltScope> = None;
    let mut adapter_identity: Option<AdapterIdentity> = None;
    let mut media_identity: Option<MediaIdentity> = None;
    let mut empty_salt: Option<EmptySalt> = None;
    let mut tier_layout: Option<TierLayout> = None;

    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "-h" || arg == "--help" {
            return Ok(Invocation::Help);
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag.to_string(), Some(value)),
            _ => (arg.clone(), None),
        };
        let mut value = || -> Result<String, String> {
            match inline {
                Some(v) => Ok(v.to_string()),
                None => args
                    .next()
                    .ok_or_else(|| format!("{flag}: missing value ({USAGE})")),
            }
        };
        match flag.as_str() {
            "--writes" => set(&mut writes, &flag, version(&flag, &value()?)?)?,
            "--reads" => set(&mut reads, &flag, version_list(&flag, &value()?)?)?,
            "--v2-revision" => {
                let v = value()?;
                let parsed = Revision::from_name(&v).ok_or_else(|| {
                    format!("{flag}: expected split_width or layout_only, got {v:?}")
                })?;
                set(&mut revision, &flag, parsed)?
            }
            "--plan-key-window" => {
                let v = value()?;
                let parsed = match v.as_str() {
                    "keyed" => WindowKeying::Keyed,
                    "structure" => WindowKeying::Structure,
                    _ => return Err(format!("{flag}: expected keyed or structure, got {v:?}")),
                };
                set(&mut keying, &flag, parsed)?
            }
            "--prefix-partial" => {
                let parsed = choice(&flag, Partial::VALUES, &value()?)?;
                set(&mut partial, &flag, parsed)?
            }
            "--prefix-salt-scope" => {
                let parsed = choice(&flag, SaltScope::VALUES, &value()?)?;
                set(&mut salt_scope, &flag, parsed)?
            }
            "--prefix-adapter-identity" => {
                let parsed = choice(&flag, AdapterIdentity::VALUES, &value()?)?;
                set(&mut adapter_identity, &flag, parsed)?
            }
            "--prefix-media-identity" => {
                let parsed = choice(&flag, MediaIdentity::VALUES, &value()?)?;
                set(&mut media_identity, &flag, parsed)?
            }
            "--prefix-empty-salt" => {
                let parsed = choice(&flag, EmptySalt::VALUES, &value()?)?;
                set(&mut empty_salt, &flag, parsed)?
            }
            "--prefix-tier-layout" => {
                let parsed = choice(&flag, TierLayout::VALUES, &value()?)?;
                set(&mut tier_layout, &flag, parsed)?
            }
            _ => return Err(format!("unknown argument {arg:?} ({USAGE})")),
        }
    }

    let writes = writes.unwrap_or(1);
    let reads = reads.unwrap_or_else(|| vec![writes]);
    if !reads.contains(&writes) {
        return Err(format!(
            "--reads: the readable set {} must contain the version written ({writes})",
            list(&reads)
        ));
    }
    Ok(Invocation::Serve(Config {
        profile: Profile {
            writes,
            reads,
            revision: revision.unwrap_or_default(),
        },
        window_keying: keying.unwrap_or_default(),
        prefix: {
            let ours = prefix::Options::default();
            prefix::Options {
                partial: partial.unwrap_or(ours.partial),
                salt_scope: salt_scope.unwrap_or(ours.salt_scope),
                adapter_identity: adapter_identity.unwrap_or(ours.adapter_identity),
                media_identity: media_identity.unwrap_or(ours.media_identity),
                empty_salt: empty_salt.unwrap_or(ours.empty_salt),
                tier_layout: tier_layout.unwrap_or(ours.tier_layout),
            }
        },
    }))
}

/// One of an option's named values.
fn choice<T: Copy>(flag: &str, choices: Choices<T>, text: &str) -> Result<T, String> {
    prefix::named(choices, text).ok_or_else(|| {
        let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
        format!("{flag}: expected {}, got {text:?}", names.join(" or "))
    })
}

fn set<T>(slot: &mut Option<T>, flag: &str, value: T) -> Result<(), String> {
    match slot.replace(value) {
        None => Ok(()),
        Some(_) => Err(format!("{flag}: given more than once")),
    }
}

fn version(flag: &str, text: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .ok()
        .filter(|v| DEFINED_VERSIONS.contains(v))
        .ok_or_else(|| format!("{flag}: expected a format version 1 or 2, got {text:?}"))
}

/// A comma-separated, non-empty set of defined versions, returned sorted.
fn version_list(flag: &str, text: &str) -> Result<Vec<u64>, String> {
    let mut versions = Vec::new();
    for item in text.split(',') {
        let v = version(flag, item.trim())?;
        if versions.contains(&v) {
            return Err(format!("{flag}: version {v} is listed twice"));
        }
        versions.push(v);
    }
    versions.sort_unstable();
    Ok(versions)
}

fn list(versions: &[u64]) -> String {
    let items: Vec<String> = versions.iter().map(u64::to_string).collect();
    format!("[{}]", items.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Invocation, String> {
        parse_args(line.split_whitespace().map(String::from))
    }

    fn config(line: &str) -> Config {
        match parse(line) {
            Ok(Invocation::Serve(c)) => c,
            other => panic!("{line:?}: {other:?}"),
        }
    }

    #[test]
    fn defaults_are_profile_v1_keyed() {
        let c = config("");
        assert_eq!(c, Config::default());
        assert_eq!((c.profile.writes, c.profile.reads), (1, vec![1]));
        assert_eq!(c.profile.revision, Revision::SplitWidth);
        assert_eq!(c.window_keying, WindowKeying::Keyed);
    }

    #[test]
    fn flags_set_the_declaration() {
        let c = config("--writes 2");
        assert_eq!((c.profile.writes, c.profile.reads), (2, vec![2]));
        let c = config("--writes 2 --reads 2,1 --v2-revision layout_only");
        assert_eq!((c.profile.writes, c.profile.reads), (2, vec![1, 2]));
        assert_eq!(c.profile.revision, Revision::LayoutOnly);
        let c = config("--reads=1,2 --plan-key-window=structure");
        assert_eq!((c.profile.writes, c.profile.reads), (1, vec![1, 2]));
        assert_eq!(c.window_keying, WindowKeying::Structure);
        assert_eq!(parse("--help"), Ok(Invocation::Help));
        let c = config("--prefix-salt-scope root --prefix-empty-salt=refuse");
        assert_eq!(c.prefix.salt_scope, SaltScope::Root);
        assert_eq!(c.prefix.empty_salt, EmptySalt::Refuse);
        assert_eq!(c.prefix.media_identity, MediaIdentity::Content);
        let c = config("--prefix-adapter-identity content --prefix-media-identity caller");
        assert_eq!(c.prefix.adapter_identity, AdapterIdentity::Content);
        assert_eq!(c.prefix.media_identity, MediaIdentity::Caller);
        assert_eq!(c.prefix.salt_scope, SaltScope::EveryBlock);
        assert_eq!(c.prefix.partial, Partial::None);
        let c = config("--prefix-partial tokens");
        assert_eq!(c.prefix.partial, Partial::Tokens);
        let c = config("--prefix-partial exact_tail --prefix-tier-layout converted");
        assert_eq!(c.prefix.partial, Partial::ExactTail);
        assert_eq!(c.prefix.tier_layout, TierLayout::Converted);
        assert_eq!(config("").prefix.tier_layout, TierLayout::Keyed);
    }

    #[test]
    fn bad_flags_are_refused() {
        for bad in [
            "--writes 3",
            "--writes",
            "--writes two",
            "--reads 2",
            "--writes 2 --reads 1",
            "--reads 1,,2",
            "--reads 1,1",
            "--reads",
            "--v2-revision both",
            "--plan-key-window window",
            "--prefix-salt-scope block",
            "--prefix-partial some",
            "--prefix-tier-layout raw",
            "--prefix-empty-salt",
            "--prefix-media-identity caller --prefix-media-identity content",
            "--writes 1 --writes 1",
            "--verbose",
            "extra",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
