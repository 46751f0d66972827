//! Prefix-cache reuse (spec/prefix.md, PREFIX): which leading blocks of a
//! request an engine may reuse from the requests it stored before.
//!
//! A block is named by a chain of SHA-256 digests (`sha256.rs`): block `i`'s
//! id is the digest of a record holding block `i - 1`'s id, block `i`'s
//! tokens and every discriminant that reaches it. So a change anywhere in
//! block `i` changes every later id (PREFIX-3, PREFIX-4, PREFIX-12), and a
//! 256-bit collision-resistant digest names the whole prefix (PREFIX-19,
//! option `prefix_key: digest`). Only full blocks are named, stored and
//! reused (option `prefix_partial: none`, PREFIX-5).
//!
//! Every field of a record starts with a one-byte tag and every string with
//! its byte length, so no salt, user key, adapter or media value can be read
//! as another field or another split of the same bytes (PREFIX-16), and an
//! absent value (tag, 0) differs from an empty one (tag, 1, length 0)
//! (PREFIX-14).
//!
//! What this adapter chose where the spec leaves a choice (each an option it
//! declares, CONF-6): the salt in every block's record (`every_block`) unless
//! the command line asks for the root only; the user key and the adapter in
//! every block too (the spec only asks that they reach every block); a
//! seeded root (`prefix_root: seeded`, the default), so the chain of a shared
//! tier is the same in every process (PREFIX-20, PREFIX-22).

use std::cell::RefCell;
use std::collections::HashSet;
use std::rc::Rc;

use crate::identity::Counter;
use crate::sha256;

/// A block's id: the SHA-256 digest of its record.
pub type BlockId = [u8; 32];

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

/// An option's values by their names in `hello`, the spec's default first.
pub type Choices<T> = &'static [(&'static str, T)];

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
    pub salt_scope: SaltScope,
    pub adapter_identity: AdapterIdentity,
    pub media_identity: MediaIdentity,
    pub empty_salt: EmptySalt,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            salt_scope: SaltScope::EveryBlock,
            adapter_identity: AdapterIdentity::Instance,
            media_identity: MediaIdentity::Content,
            empty_salt: EmptySalt::Distinct,
        }
    }
}

impl Options {
    /// The options to declare in `hello`: those not at the spec's default
    /// (the first of each option's values), and the shared tier, which this
    /// adapter always has (`prefix_tier: shared`, PREFIX-21).
    pub fn declared(&self) -> Vec<(&'static str, &'static str)> {
        fn differs<T: PartialEq>(choices: Choices<T>, value: &T) -> bool {
            choices[0].1 != *value
        }
        let mut out = Vec::new();
        if differs(SaltScope::VALUES, &self.salt_scope) {
            out.push((
                "prefix_salt_scope",
                name_of(SaltScope::VALUES, &self.salt_scope),
            ));
        }
        if differs(AdapterIdentity::VALUES, &self.adapter_identity) {
            let name = name_of(AdapterIdentity::VALUES, &self.adapter_identity);
            out.push(("prefix_adapter_identity", name));
        }
        if differs(MediaIdentity::VALUES, &self.media_identity) {
            let name = name_of(MediaIdentity::VALUES, &self.media_identity);
            out.push(("prefix_media_identity", name));
        }
        if differs(EmptySalt::VALUES, &self.empty_salt) {
            out.push((
                "prefix_empty_salt",
                name_of(EmptySalt::VALUES, &self.empty_salt),
            ));
        }
        out.push(("prefix_tier", "shared"));
        out
    }
}

/// The tag in front of each field of a record (PREFIX-16).
mod tag {
    pub const SCHEME: u8 = 0x01;
    pub const ENGINE: u8 = 0x02;
    pub const PARENT: u8 = 0x10;
    pub const TOKENS: u8 = 0x11;
    pub const SALT: u8 = 0x12;
    pub const USER_KEY: u8 = 0x13;
    pub const ADAPTER: u8 = 0x14;
    pub const SPANS: u8 = 0x15;
    pub const MEDIA: u8 = 0x16;
    pub const EMBEDS: u8 = 0x17;
    pub const ADAPTER_INSTANCE: u8 = 0x20;
    pub const ADAPTER_WEIGHTS: u8 = 0x21;
    pub const MEDIA_CONTENT: u8 = 0x22;
    pub const MEDIA_CALLER: u8 = 0x23;
    pub const LABEL: u8 = 0x24;
}

/// Names this scheme in every root, so its ids can never equal another
/// scheme's (a later version of this record changes the text).
const SCHEME: &str = "kvconform-rust-adapter prefix chain, record version 1";

/// A record being written: tagged fields, integers as big-endian u64s,
/// strings as their byte length and bytes.
#[derive(Default)]
struct Record(Vec<u8>);

impl Record {
    fn tag(&mut self, tag: u8) -> &mut Record {
        self.0.push(tag);
        self
    }
    fn u64(&mut self, value: u64) -> &mut Record {
        self.0.extend_from_slice(&value.to_be_bytes());
        self
    }
    fn text(&mut self, value: &str) -> &mut Record {
        self.bytes(value.as_bytes())
    }
    fn bytes(&mut self, value: &[u8]) -> &mut Record {
        self.u64(value.len() as u64);
        self.0.extend_from_slice(value);
        self
    }
    /// 0 for absent, 1 and the string for present (empty or not).
    fn optional_text(&mut self, value: Option<&str>) -> &mut Record {
        match value {
            None => self.0.push(0),
            Some(text) => {
                self.0.push(1);
                self.text(text);
            }
        }
        self
    }
    fn digest(&self) -> BlockId {
        sha256::digest(&self.0)
    }
}

/// The digest of a label standing for bytes the suite does not send
/// (weights, media content, embeddings): equal labels, equal bytes.
fn label_digest(label: &str) -> BlockId {
    let mut record = Record::default();
    record.tag(tag::LABEL).text(label);
    record.digest()
}

/// Adapter instances: never recycled within the process, across `reset`
/// too (PREFIX-8, as ID-3 for models). Numbered unlike model instances.
static ADAPTER_INSTANCES: Counter = Counter::new(40_000_001, 11);

/// A loaded adapter (LoRA). It has no name: a name never identifies an
/// adapter, since the same name may be loaded again with other weights
/// (PREFIX-8), and an identity that holds none cannot be keyed by one.
#[derive(Clone, Debug)]
pub struct Lora {
    weights: BlockId,
    instance: u64,
}

impl Lora {
    pub fn load(weights: &str) -> Lora {
        Lora {
            weights: label_digest(weights),
            instance: ADAPTER_INSTANCES.mint(),
        }
    }

    /// Its identity: the instance in memory unless the option says content;
    /// at a shared tier always its weights, which every process agrees on
    /// (PREFIX-21, PREFIX-22).
    fn write(&self, record: &mut Record, rule: AdapterIdentity, scope: Scope) {
        match (scope, rule) {
            (Scope::Memory, AdapterIdentity::Instance) => {
                record.tag(tag::ADAPTER_INSTANCE).u64(self.instance);
            }
            _ => {
                record.tag(tag::ADAPTER_WEIGHTS).bytes(&self.weights);
            }
        }
    }
}

/// Something placed over `length` positions from `start` that replaces what
/// the token ids there would give.
#[derive(Clone, Debug)]
pub enum Span {
    /// A media item: its content and shape (PREFIX-9), its placement
    /// (PREFIX-10), and the caller's id for it if any (PREFIX-11).
    Media {
        start: u64,
        length: u64,
        content: BlockId,
        width: u64,
        height: u64,
        caller_id: Option<String>,
    },
    /// Prompt embeddings, by their content (PREFIX-17).
    Embeds {
        start: u64,
        length: u64,
        content: BlockId,
    },
}

impl Span {
    pub fn media(
        (start, length): (u64, u64),
        content: &str,
        (width, height): (u64, u64),
        caller_id: Option<&str>,
    ) -> Span {
        Span::Media {
            start,
            length,
            content: label_digest(content),
            width,
            height,
            caller_id: caller_id.map(str::to_string),
        }
    }

    pub fn embeds(start: u64, length: u64, content: &str) -> Span {
        Span::Embeds {
            start,
            length,
            content: label_digest(content),
        }
    }

    fn placement(&self) -> (u64, u64) {
        match self {
            Span::Media { start, length, .. } | Span::Embeds { start, length, .. } => {
                (*start, *length)
            }
        }
    }

    /// Whether it covers a position in `first .. end`.
    fn covers(&self, first: u64, end: u64) -> bool {
        let (start, length) = self.placement();
        start < end && first < start.saturating_add(length)
    }

    /// Its own record: every part of its identity, length-delimited.
    fn encode(&self, rule: MediaIdentity) -> Vec<u8> {
        let mut record = Record::default();
        let (start, length) = self.placement();
        match self {
            Span::Media {
                content,
                width,
                height,
                caller_id,
                ..
            } => {
                record.tag(tag::MEDIA);
                match (rule, caller_id) {
                    (MediaIdentity::Caller, Some(id)) => record.tag(tag::MEDIA_CALLER).text(id),
                    // Under content, or a caller who gave no id: the content.
                    _ => record.tag(tag::MEDIA_CONTENT).bytes(content),
                };
                record.u64(*width).u64(*height);
            }
            Span::Embeds { content, .. } => {
                record.tag(tag::EMBEDS).bytes(content);
            }
        }
        record.u64(start).u64(length);
        record.0
    }
}

/// A request: token ids and their discriminants (spec/prefix.md).
#[derive(Clone, Debug)]
pub struct Request {
    tokens: Vec<u32>,
    salt: Option<String>,
    user_key: Option<String>,
    pub lora: Option<Lora>,
    pub spans: Vec<Span>,
}

impl Request {
    /// `tokens` as spec/protocol.md writes them: decimal ids below 2^32,
    /// no leading zeros, separated by single spaces, never empty.
    pub fn new(
        tokens: &str,
        salt: Option<&str>,
        user_key: Option<&str>,
    ) -> Result<Request, String> {
        let mut ids = Vec::new();
        for word in tokens.split(' ') {
            let canonical = !word.is_empty()
                && word.bytes().all(|b| b.is_ascii_digit())
                && (word == "0" || !word.starts_with('0'));
            match word.parse::<u32>() {
                Ok(id) if canonical => ids.push(id),
                _ => {
                    return Err(format!(
                        "expected decimal token ids below 2^32 separated by single spaces, \
                         got {tokens:?}"
                    ))
                }
            }
        }
        Ok(Request {
            tokens: ids,
            salt: salt.map(str::to_string),
            user_key: user_key.map(str::to_string),
            lora: None,
            spans: Vec::new(),
        })
    }

    pub fn salt(&self) -> Option<&str> {
        self.salt.as_deref()
    }
}

/// What the process computes (PREFIX-21): keyed at a shared tier, where
/// another process may read the block.
#[derive(Clone, Debug)]
pub struct Engine {
    pub model: String,
    pub kv_dtype: String,
    pub layout: String,
    pub shard: String,
}

/// A shared tier: storage outside every process, holding block ids. One
/// tier is shared by every prefix cache attached to it.
pub type Tier = Rc<RefCell<HashSet<BlockId>>>;

/// Which identities a chain is computed with.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// This process's prefix cache.
    Memory,
    /// A shared tier: portable identities and the engine in the root.
    Shared,
}

/// One engine process's store of computed blocks.
pub struct PrefixCache {
    block_size: u64,
    engine: Engine,
    options: Options,
    /// Never evicted: PREFIX-6 asks for the 64 most recent blocks at least.
    blocks: HashSet<BlockId>,
    tier: Option<Tier>,
}

impl PrefixCache {
    pub fn new(block_size: u64, engine: Engine, options: Options) -> Result<PrefixCache, String> {
        if block_size == 0 {
            return Err("block_size: a block holds at least one position".into());
        }
        Ok(PrefixCache {
            block_size,
            engine,
            options,
            blocks: HashSet::new(),
            tier: None,
        })
    }

    pub fn attach(&mut self, tier: Tier) {
        self.tier = Some(tier);
    }

    /// Hold every full block of a computed request, and write it to the
    /// tier if one is attached. Store and lookup name blocks with the same
    /// function (PREFIX-18).
    pub fn store(&mut self, request: &Request) {
        self.blocks.extend(self.chain(request, Scope::Memory));
        if let Some(tier) = &self.tier {
            tier.borrow_mut().extend(self.chain(request, Scope::Shared));
        }
    }

    /// How many leading positions of `request` this cache would reuse
    /// (PREFIX-1): whole blocks, each found in memory or at the tier, up to
    /// the first block found in neither. Stores nothing.
    pub fn lookup(&self, request: &Request) -> u64 {
        let memory = self.chain(request, Scope::Memory);
        let shared = self
            .tier
            .as_ref()
            .map(|tier| (tier.borrow(), self.chain(request, Scope::Shared)));
        let found = memory
            .iter()
            .enumerate()
            .take_while(|(i, id)| {
                self.blocks.contains(*id)
                    || shared
                        .as_ref()
                        .is_some_and(|(tier, ids)| tier.contains(&ids[*i]))
            })
            .count();
        found as u64 * self.block_size
    }

    /// The id of each full block of `request`, in order.
    fn chain(&self, request: &Request, scope: Scope) -> Vec<BlockId> {
        let full = request.tokens.len() as u64 / self.block_size;
        let mut parent = self.root(request, scope);
        (0..full)
            .map(|i| {
                parent = self.block_record(request, i, &parent, scope).digest();
                parent
            })
            .collect()
    }

    /// The chain's root: fixed for a scheme (a seeded root, PREFIX-20), plus
    /// the engine at a shared tier (PREFIX-21) and the salt under `root`.
    fn root(&self, request: &Request, scope: Scope) -> BlockId {
        let mut record = Record::default();
        record.tag(tag::SCHEME).text(SCHEME);
        if scope == Scope::Shared {
            let e = &self.engine;
            record.tag(tag::ENGINE).text(&e.model).text(&e.kv_dtype);
            record.text(&e.layout).text(&e.shard).u64(self.block_size);
        }
        if self.options.salt_scope == SaltScope::Root {
            record.tag(tag::SALT).optional_text(request.salt());
        }
        record.digest()
    }

    /// Block `index`'s record: its parent, tokens and discriminants.
    fn block_record(
        &self,
        request: &Request,
        index: u64,
        parent: &BlockId,
        scope: Scope,
    ) -> Record {
        let (first, end) = (index * self.block_size, (index + 1) * self.block_size);
        let tokens = &request.tokens[first as usize..end as usize];
        let mut record = Record::default();
        record.tag(tag::PARENT).bytes(parent);
        record.tag(tag::TOKENS).u64(tokens.len() as u64);
        for &token in tokens {
            record.u64(u64::from(token));
        }
        if self.options.salt_scope == SaltScope::EveryBlock {
            record.tag(tag::SALT).optional_text(request.salt());
        }
        record
            .tag(tag::USER_KEY)
            .optional_text(request.user_key.as_deref());
        record.tag(tag::ADAPTER);
        match &request.lora {
            None => record.0.push(0),
            Some(lora) => {
                record.0.push(1);
                lora.write(&mut record, self.options.adapter_identity, scope);
            }
        }
        // Every span covering a position of the block, in a fixed order so
        // the order they were added in does not matter.
        let mut spans: Vec<Vec<u8>> = request
            .spans
            .iter()
            .filter(|span| span.covers(first, end))
            .map(|span| span.encode(self.options.media_identity))
            .collect();
        spans.sort();
        record.tag(tag::SPANS).u64(spans.len() as u64);
        for span in &spans {
            record.bytes(span);
        }
        record
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> Engine {
        Engine {
            model: "m".into(),
            kv_dtype: "bf16".into(),
            layout: "nhd".into(),
            shard: "tp0".into(),
        }
    }

    fn cache(options: Options) -> PrefixCache {
        PrefixCache::new(4, engine(), options).unwrap()
    }

    fn req(tokens: &str, salt: Option<&str>, user_key: Option<&str>) -> Request {
        Request::new(tokens, salt, user_key).unwrap()
    }

    #[test]
    fn full_blocks_are_reused_up_to_the_first_difference() {
        let mut c = cache(Options::default());
        c.store(&req("1 2 3 4 5 6 7 8 9 10", None, None));
        assert_eq!(c.lookup(&req("1 2 3 4 5 6 7 8 9 10 11 12", None, None)), 8);
        assert_eq!(c.lookup(&req("1 2 3 4 5 0 7 8", None, None)), 4);
        assert_eq!(c.lookup(&req("5 6 7 8", None, None)), 0);
        assert_eq!(c.lookup(&req("1 2 3", None, None)), 0);
    }

    #[test]
    fn namespaces_are_typed_and_delimited() {
        for scope in [SaltScope::Root, SaltScope::EveryBlock] {
            let mut c = cache(Options {
                salt_scope: scope,
                ..Options::default()
            });
            c.store(&req("1 2 3 4", Some("ab"), Some("c")));
            assert_eq!(c.lookup(&req("1 2 3 4", Some("ab"), Some("c"))), 4);
            assert_eq!(c.lookup(&req("1 2 3 4", Some("a"), Some("bc"))), 0);
            assert_eq!(c.lookup(&req("1 2 3 4", Some("c"), Some("ab"))), 0);
            c.store(&req("1 2 3 4", None, None));
            assert_eq!(c.lookup(&req("1 2 3 4", Some(""), None)), 0);
        }
    }

    #[test]
    fn a_reloaded_adapter_is_another_identity_unless_content_says_otherwise() {
        let first = Lora::load("w1");
        let again = Lora::load("w1");
        for (rule, shares) in [
            (AdapterIdentity::Instance, false),
            (AdapterIdentity::Content, true),
        ] {
            let mut c = cache(Options {
                adapter_identity: rule,
                ..Options::default()
            });
            let mut a = req("1 2 3 4", None, None);
            a.lora = Some(first.clone());
            c.store(&a);
            let mut b = req("1 2 3 4", None, None);
            b.lora = Some(again.clone());
            assert_eq!(c.lookup(&b), if shares { 4 } else { 0 });
            b.lora = Some(Lora::load("w2"));
            assert_eq!(c.lookup(&b), 0);
        }
    }

    #[test]
    fn media_keys_shape_and_placement_and_reaches_later_blocks() {
        let mut c = cache(Options::default());
        let mut a = req("7 7 7 7 1 2 3 4", None, None);
        a.spans.push(Span::media((0, 4), "pixels", (30, 100), None));
        c.store(&a);
        let mut b = req("7 7 7 7 1 2 3 4", None, None);
        b.spans.push(Span::media((0, 4), "pixels", (100, 30), None));
        assert_eq!(c.lookup(&b), 0);
        b.spans[0] = Span::media((0, 4), "pixels", (30, 100), None);
        assert_eq!(c.lookup(&b), 8);
    }
}
