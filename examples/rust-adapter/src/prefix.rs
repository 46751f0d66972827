//! Prefix-cache reuse (spec/prefix.md, PREFIX): how many leading positions
//! of a request an engine may reuse from the requests it stored before.
//!
//! Blocks are named by a chain of SHA-256 digests (`sha256.rs`): block `i`'s
//! id is the digest of a record (`prefix/record.rs`) holding block `i - 1`'s
//! id, block `i`'s token ids and every discriminant that reaches the block.
//! So a change anywhere in block `i` changes every later id (PREFIX-3,
//! PREFIX-4, PREFIX-12), and a 256-bit collision-resistant digest names the
//! whole prefix (PREFIX-19, option `prefix_key: digest`).
//!
//! What this adapter chose where the spec leaves a choice (the options it
//! declares, `prefix/options.rs`): the salt in every block's record
//! (`every_block`) unless the command line asks for the root only; the user
//! key and the adapter in every block too (the spec only asks that they
//! reach every block); a seeded root (`prefix_root: seeded`), so a shared
//! tier's chain is the same in every process (PREFIX-20, PREFIX-22).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use crate::identity::Counter;

mod options;
mod record;
#[cfg(test)]
mod tests;
mod tier;

pub use options::{
    named, AdapterIdentity, Choices, EmptySalt, MediaIdentity, Options, Partial, SaltScope,
    TierLayout,
};
use record::{label_digest, tag, Record, SCHEME};

/// A block's id: the SHA-256 digest of its record.
pub type BlockId = [u8; 32];

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
        record.into_bytes()
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
/// tier is shared by every prefix cache attached to it (`prefix/tier.rs`).
pub type Tier = Rc<RefCell<SharedTier>>;
pub use tier::SharedTier;

/// Which identities a chain is computed with.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// This process's prefix cache.
    Memory,
    /// A shared tier: portable identities, and the engine in the root.
    Shared,
}

/// A point a lookup can reach: the positions it covers from the start of
/// the request, and the id that names them.
type Checkpoint = (u64, BlockId);

/// One engine process's store of computed blocks.
pub struct PrefixCache {
    block_size: u64,
    engine: Engine,
    options: Options,
    /// Each held checkpoint, with the number of the store that last stored it.
    /// Without a capacity nothing is evicted (PREFIX-6 asks for the 64 most
    /// recent blocks at least); with one, the least recently stored go first.
    held: HashMap<BlockId, u64>,
    stores: u64,
    capacity: Option<u64>,
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
            held: HashMap::new(),
            stores: 0,
            capacity: None,
            tier: None,
        })
    }

    /// Hold at most `blocks` blocks (PREFIX-24). Not under `prefix_partial:
    /// tokens`, where a block has a checkpoint per position; under `none` and
    /// `exact_tail` each checkpoint is a block (a kept partial last block
    /// counts as one), and the adapter declares `prefix_capacity` only then.
    pub fn bound(&mut self, blocks: u64) -> Result<(), String> {
        if blocks == 0 {
            return Err("capacity: a cache holds at least one block".into());
        }
        if self.options.partial == Partial::Tokens {
            return Err("capacity: not under prefix_partial: tokens".into());
        }
        self.capacity = Some(blocks);
        Ok(())
    }

    pub fn attach(&mut self, tier: Tier) {
        self.tier = Some(tier);
    }

    /// Hold every checkpoint of a computed request, and write them to the
    /// tier if one is attached. Store and lookup name them with the same
    /// function (PREFIX-18). Fails only where the tier's storage cannot be written.
    pub fn store(&mut self, request: &Request) -> Result<(), String> {
        let ids = self.checkpoints(request, Scope::Memory);
        self.stores += 1;
        for (_, id) in ids {
            // stored again: counted with this store (PREFIX-24)
            self.held.insert(id, self.stores);
        }
        if let Some(capacity) = self.capacity {
            while self.held.len() as u64 > capacity {
                // the least recently stored; of one store's blocks, the smallest
                // id: which of them goes first is the engine's own (PREFIX-24)
                let oldest = *self
                    .held
                    .iter()
                    .min_by_key(|(id, store)| (**store, **id))
                    .expect("more held than a capacity of at least one")
                    .0;
                self.held.remove(&oldest);
            }
        }
        if let Some(tier) = &self.tier {
            let ids = self.checkpoints(request, Scope::Shared);
            tier.borrow_mut().write(ids.into_iter().map(|(_, id)| id))?;
        }
        Ok(())
    }

    /// How many leading positions of `request` this cache would reuse
    /// (PREFIX-1): the checkpoints found in memory or at the tier, up to
    /// the first found in neither. Stores nothing.
    pub fn lookup(&self, request: &Request) -> u64 {
        let memory = self.checkpoints(request, Scope::Memory);
        let shared = self
            .tier
            .as_ref()
            .map(|tier| (tier.borrow(), self.checkpoints(request, Scope::Shared)));
        let at_tier = |i: usize| {
            shared
                .as_ref()
                .is_some_and(|(tier, ids)| tier.contains(&ids[i].1))
        };
        memory
            .iter()
            .enumerate()
            .take_while(|(i, (_, id))| self.held.contains_key(id) || at_tier(*i))
            .last()
            .map_or(0, |(_, (positions, _))| *positions)
    }

    /// The request's checkpoints, in order. Under `prefix_partial: none`
    /// one per full block (PREFIX-5); under `exact_tail` the partial last
    /// block too, whose record counts its tokens, so only a request ending
    /// with exactly those positions meets it; under `tokens` one per
    /// position, each naming its block's leading positions up to it, so a
    /// lookup can stop inside a block but never past a position the stored
    /// request had. Either way a whole block's id is the next block's parent.
    fn checkpoints(&self, request: &Request, scope: Scope) -> Vec<Checkpoint> {
        let length = request.tokens.len() as u64;
        let mut parent = self.root(request, scope);
        let mut out = Vec::new();
        let mut first = 0;
        while first < length {
            let end = (first + self.block_size).min(length);
            let whole = end - first == self.block_size;
            let stops = match self.options.partial {
                Partial::None if whole => end..=end,
                Partial::None => break,
                Partial::ExactTail => end..=end,
                Partial::Tokens => first + 1..=end,
            };
            for stop in stops {
                let id = self.record(request, (first, stop), &parent, scope).digest();
                out.push((stop, id));
            }
            if !whole {
                break;
            }
            parent = out.last().expect("a whole block has a checkpoint").1;
            first = end;
        }
        out
    }

    /// The chain's root: fixed for a scheme (a seeded root, PREFIX-20), plus
    /// the engine at a shared tier (PREFIX-21; its layout only where the tier
    /// keeps blocks as written, PREFIX-25) and the salt under `root`.
    fn root(&self, request: &Request, scope: Scope) -> BlockId {
        let mut record = Record::default();
        record.tag(tag::SCHEME).text(SCHEME);
        if scope == Scope::Shared {
            let e = &self.engine;
            let layout = match self.options.tier_layout {
                TierLayout::Keyed => Some(e.layout.as_str()),
                TierLayout::Converted => None,
            };
            record.tag(tag::ENGINE).text(&e.model).text(&e.kv_dtype);
            record
                .optional_text(layout)
                .text(&e.shard)
                .u64(self.block_size);
        }
        if self.options.salt_scope == SaltScope::Root {
            record.tag(tag::SALT).optional_text(request.salt());
        }
        record.digest()
    }

    /// The record of positions `first .. stop` of one block: its parent,
    /// their tokens, and every discriminant that reaches them.
    fn record(
        &self,
        request: &Request,
        (first, stop): (u64, u64),
        parent: &BlockId,
        scope: Scope,
    ) -> Record {
        let tokens = &request.tokens[first as usize..stop as usize];
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
        record.tag(tag::ADAPTER).presence(request.lora.is_some());
        if let Some(lora) = &request.lora {
            lora.write(&mut record, self.options.adapter_identity, scope);
        }
        // Every span covering one of the positions, in a fixed order, so the
        // order they were added in does not matter.
        let mut spans: Vec<Vec<u8>> = request
            .spans
            .iter()
            .filter(|span| span.covers(first, stop))
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
