//! The options of the class `prefix_cache` this adapter can answer either
//! way (CONF-6), chosen on the command line (`config.rs`) and declared in
//! `hello`. Every value is safe; spec/README.md's decisions table says why.

/// Whether a block may be reused in part (option `prefix_partial`, PREFIX-5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partial {
    /// Whole blocks only.
    None,
    /// The leading positions of a block, as far as they were computed alike.
    Tokens,
    /// Whole blocks, and a request's partial last block kept whole: reused
    /// only by a request that ends with the same positions.
    ExactTail,
}

/// What a shared tier holds (option `prefix_tier_layout`, PREFIX-25).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TierLayout {
    /// Blocks as their writer lays them out: the layout is in their key.
    Keyed,
    /// Blocks in a layout of the tier's own, converted on both sides: the
    /// layout is in no key there.
    Converted,
}

/// Where a request's salt enters the chain (option `prefix_salt_scope`,
/// PREFIX-13); through the chain it reaches every later block either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaltScope {
    Root,
    EveryBlock,
}

/// What identifies a loaded adapter in memory (option
/// `prefix_adapter_identity`, PREFIX-8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdapterIdentity {
    /// Every load is a new instance, never recycled.
    Instance,
    /// Equal weights, equal identity.
    Content,
}

/// What identifies a media item (option `prefix_media_identity`, PREFIX-11);
/// its shape and placement are keyed under both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaIdentity {
    Content,
    Caller,
}

/// What an empty salt is (option `prefix_empty_salt`, PREFIX-14).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmptySalt {
    Distinct,
    Refuse,
}

/// An option's values by their names in `hello`, the spec's default first.
pub type Choices<T> = &'static [(&'static str, T)];

impl Partial {
    pub const VALUES: Choices<Partial> = &[
        ("none", Partial::None),
        ("tokens", Partial::Tokens),
        ("exact_tail", Partial::ExactTail),
    ];
}

impl TierLayout {
    pub const VALUES: Choices<TierLayout> = &[
        ("keyed", TierLayout::Keyed),
        ("converted", TierLayout::Converted),
    ];
}

impl SaltScope {
    pub const VALUES: Choices<SaltScope> = &[
        ("root", SaltScope::Root),
        ("every_block", SaltScope::EveryBlock),
    ];
}

impl AdapterIdentity {
    pub const VALUES: Choices<AdapterIdentity> = &[
        ("instance", AdapterIdentity::Instance),
        ("content", AdapterIdentity::Content),
    ];
}

impl MediaIdentity {
    pub const VALUES: Choices<MediaIdentity> = &[
        ("content", MediaIdentity::Content),
        ("caller", MediaIdentity::Caller),
    ];
}

impl EmptySalt {
    pub const VALUES: Choices<EmptySalt> = &[
        ("distinct", EmptySalt::Distinct),
        ("refuse", EmptySalt::Refuse),
    ];
}

/// The name of `value` among `choices`.
pub fn name_of<T: PartialEq>(choices: Choices<T>, value: &T) -> &'static str {
    choices
        .iter()
        .find(|(_, v)| v == value)
        .map(|(name, _)| *name)
        .expect("every value has a name")
}

/// The value named `name` among `choices`, if any.
pub fn named<T: Copy>(choices: Choices<T>, name: &str) -> Option<T> {
    choices.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// The options of the class that this adapter lets its flags choose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    pub partial: Partial,
    pub salt_scope: SaltScope,
    pub adapter_identity: AdapterIdentity,
    pub media_identity: MediaIdentity,
    pub empty_salt: EmptySalt,
    pub tier_layout: TierLayout,
}

impl Default for Options {
    /// This adapter's own answers: the spec's defaults but for the salt,
    /// which it keys in every block (the reference keys it in the root).
    fn default() -> Options {
        Options {
            partial: Partial::None,
            salt_scope: SaltScope::EveryBlock,
            adapter_identity: AdapterIdentity::Instance,
            media_identity: MediaIdentity::Content,
            empty_salt: EmptySalt::Distinct,
            tier_layout: TierLayout::Keyed,
        }
    }
}

impl Options {
    /// The options to declare in `hello`: those not at the spec's default
    /// (the first of each option's values), and the shared tier, which this
    /// adapter always has (`prefix_tier: shared`, PREFIX-21).
    pub fn declared(&self) -> Vec<(&'static str, &'static str)> {
        fn push<T: PartialEq>(
            out: &mut Vec<(&'static str, &'static str)>,
            option: &'static str,
            choices: Choices<T>,
            value: &T,
        ) {
            if choices[0].1 != *value {
                out.push((option, name_of(choices, value)));
            }
        }
        let mut out = Vec::new();
        push(&mut out, "prefix_partial", Partial::VALUES, &self.partial);
        push(
            &mut out,
            "prefix_salt_scope",
            SaltScope::VALUES,
            &self.salt_scope,
        );
        push(
            &mut out,
            "prefix_adapter_identity",
            AdapterIdentity::VALUES,
            &self.adapter_identity,
        );
        push(
            &mut out,
            "prefix_media_identity",
            MediaIdentity::VALUES,
            &self.media_identity,
        );
        push(
            &mut out,
            "prefix_empty_salt",
            EmptySalt::VALUES,
            &self.empty_salt,
        );
        out.push(("prefix_tier", "shared"));
        push(
            &mut out,
            "prefix_tier_layout",
            TierLayout::VALUES,
            &self.tier_layout,
        );
        out
    }
}
