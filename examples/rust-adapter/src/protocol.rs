//! The adapter side of the JSON-lines stdio protocol (spec/protocol.md).
//!
//! One request in, one response out, in order. Handles are names chosen by
//! the harness; this side keeps the objects they name in one map, so a name
//! refers to exactly one live object whatever its kind.

use std::collections::{BTreeMap, HashMap};

use crate::config::{Config, WindowKeying};
use crate::errors::KvError;
use crate::hasher::KeyHasher;
use crate::json::Json;
use crate::kv_cache::{Geometry, KvCache, Placement};
use crate::plan::{KeyParts, Model, ModelSpec, Param, Session};
use crate::prefix::Partial;
use crate::signature::{self, Layout, Revision, Signature, StoredLayer};
use crate::verify;

mod prefix_ops;

pub const PROTOCOL: i128 = 1;
pub const NAME: &str = "kvconform-rust-adapter";
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Every class, always; `plan_validity` requires `plan`, which is claimed.
pub const CLASSES: [&str; 7] = [
    "hash",
    "identity",
    "plan",
    "plan_validity",
    "prefix_cache",
    "signature",
    "verify",
];

/// The most payload elements (all `k` and `v` buffers) one request may ask
/// this adapter to allocate: a guard against exhausting memory.
const MAX_PAYLOAD_ELEMENTS: u128 = 1 << 28;

/// What a request produced.
#[derive(Debug)]
pub enum Reply {
    Ok(Json),
    Error(KvError),
    /// A refusal outside the block-format errors of `KvError`: the empty
    /// salt under `prefix_empty_salt: refuse` (PREFIX-14), already written
    /// as an error object.
    Refusal(Json),
    // No `unsupported` form: every class is declared, so PROTO-23 never applies.
    Failure(String),
}

impl From<KvError> for Reply {
    fn from(e: KvError) -> Reply {
        Reply::Error(e)
    }
}

/// The response line for `reply` to the request numbered `seq`.
pub fn envelope(seq: Json, reply: Reply) -> Json {
    let (key, body) = match reply {
        Reply::Ok(v) => ("ok", v),
        Reply::Error(e) => ("error", e.to_json()),
        Reply::Refusal(e) => ("error", e),
        Reply::Failure(m) => ("failure", Json::Str(m)),
    };
    Json::obj([("seq", seq), (key, body)])
}

enum Object {
    Model(Model),
    Cache(KvCache),
    Session(Session),
    Prefix(prefix_ops::PrefixObject),
}

impl Object {
    fn kind(&self) -> &'static str {
        match self {
            Object::Model(_) => "a model",
            Object::Cache(_) => "a cache",
            Object::Session(_) => "a session",
            Object::Prefix(p) => p.kind(),
        }
    }
}

/// A request's outcome before it becomes a reply: `Err` is an adapter failure.
type Outcome = Result<Reply, String>;

/// Whether the caller should stop reading after this response.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    Continue,
    Exit,
}

#[derive(Default)]
pub struct Adapter {
    objects: HashMap<String, Object>,
    config: Config,
}

impl Adapter {
    /// An adapter with the default declaration (profile v1, keyed windows).
    #[cfg(test)]
    pub fn new() -> Adapter {
        Adapter::default()
    }

    pub fn with_config(config: Config) -> Adapter {
        Adapter {
            objects: HashMap::new(),
            config,
        }
    }

    /// Answer one decoded request (without its envelope).
    pub fn handle(&mut self, req: &Json) -> (Reply, Next) {
        let op = match req.get("op") {
            Some(Json::Str(op)) => op.as_str(),
            Some(other) => {
                return (
                    Reply::Failure(format!("op: expected a string, got {}", other.type_name())),
                    Next::Continue,
                )
            }
            None => return (Reply::Failure("op: missing".into()), Next::Continue),
        };
        let next = if op == "shutdown" {
            Next::Exit
        } else {
            Next::Continue
        };
        let reply = match self.dispatch(op, req) {
            Ok(reply) => reply,
            Err(message) => Reply::Failure(message),
        };
        (reply, next)
    }

    fn dispatch(&mut self, op: &str, r: &Json) -> Outcome {
        match op {
            "hello" => hello(r, &self.config),
            "reset" => {
                self.objects.clear();
                ok_null()
            }
            "shutdown" => ok_null(),
            "hash" => Ok(Reply::Ok(run_program(
                field(r, "hash", "program")?,
                "hash.program",
            )?)),
            "hash_batch" => {
                let programs = array(field(r, "hash_batch", "programs")?, "hash_batch.programs")?;
                let mut out = Vec::with_capacity(programs.len());
                for (i, p) in programs.iter().enumerate() {
                    out.push(run_program(p, &format!("hash_batch.programs[{i}]"))?);
                }
                Ok(Reply::Ok(Json::Arr(out)))
            }
            "model_new" => {
                let spec = model_spec(field(r, op, "spec")?, "model_new.spec")?;
                self.bind(text(r, op, "handle")?, Object::Model(Model::new(spec)));
                ok_null()
            }
            "model_reload" => {
                let fresh = self.model(text(r, op, "model")?)?.reload();
                self.bind(text(r, op, "handle")?, Object::Model(fresh));
                ok_null()
            }
            "model_set_hook" => {
                let hook = text(r, op, "hook")?.to_string();
                let present = boolean(field(r, op, "present")?, "model_set_hook.present")?;
                self.model_mut(text(r, op, "model")?)?
                    .set_hook(&hook, present)?;
                ok_null()
            }
            "model_instance_id" => Ok(Reply::Ok(dec(self
                .model(text(r, op, "model")?)?
                .instance_id()))),
            "cache_new" => {
                let g = geometry(field(r, op, "geometry")?, "cache_new.geometry")?;
                let cache = KvCache::new(g)?;
                self.bind(text(r, op, "handle")?, Object::Cache(cache));
                ok_null()
            }
            "cache_append" => {
                let tokens = count(field(r, op, "tokens")?, "cache_append.tokens")?;
                let cache = self.cache_mut(text(r, op, "cache")?)?;
                let fill = (cache.len() % 1000) as f32 + 1.0;
                Ok(match cache.append(tokens, fill) {
                    Ok(()) => Reply::Ok(Json::Null),
                    Err(e) => e.into(),
                })
            }
            "cache_truncate" => {
                let length = count(field(r, op, "length")?, "cache_truncate.length")?;
                self.cache_mut(text(r, op, "cache")?)?.truncate(length);
                ok_null()
            }
            "cache_clear" => {
                self.cache_mut(text(r, op, "cache")?)?.clear();
                ok_null()
            }
            "cache_replace_layer" => {
                let layer = count(field(r, op, "layer")?, "cache_replace_layer.layer")?;
                let shape =
                    ["n_kv_heads", "head_dim", "max_seq_len"].map(|name| match r.get(name) {
                        None | Some(Json::Null) => Ok(None),
                        Some(v) => count(v, &format!("cache_replace_layer.{name}")).map(Some),
                    });
                let [h, d, m] = shape;
                let (h, d, m) = (h?, d?, m?);
                let cache = self.cache_mut(text(r, op, "cache")?)?;
                let own = cache.geometry().clone();
                let result = cache.replace_layer(
                    layer,
                    h.unwrap_or(own.n_kv_heads),
                    d.unwrap_or(own.head_dim),
                    m.unwrap_or(own.max_seq_len),
                );
                Ok(match result {
                    Ok(()) => Reply::Ok(Json::Null),
                    Err(e) => e.into(),
                })
            }
            "cache_new_placed" => {
                let at = "cache_new_placed";
                let g = geometry(field(r, op, "geometry")?, "cache_new_placed.geometry")?;
                let residency = match field(r, op, "residency")? {
                    Json::Null => None,
                    Json::Str(s) => Some(s.clone()),
                    other => {
                        return Err(format!(
                            "{at}.residency: expected a string or null, got {}",
                            other.type_name()
                        ))
                    }
                };
                let labels = array(
                    field(r, op, "layer_storage")?,
                    &format!("{at}.layer_storage"),
                )?;
                let layer_storage = labels
                    .iter()
                    .enumerate()
                    .map(|(i, label)| {
                        label.as_str().map(str::to_string).ok_or_else(|| {
                            format!(
                                "{at}.layer_storage[{i}]: expected a string, got {}",
                                label.type_name()
                            )
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let placement = Placement {
                    residency,
                    layer_storage,
                };
                let cache = KvCache::placed(g, placement).map_err(|e| format!("{at}: {e}"))?;
                self.bind(text(r, op, "handle")?, Object::Cache(cache));
                ok_null()
            }
            "cache_alloc_id" => Ok(Reply::Ok(dec(self
                .cache(text(r, op, "cache")?)?
                .alloc_id()))),
            "cache_len" => Ok(Reply::Ok(Json::from(
                self.cache(text(r, op, "cache")?)?.len(),
            ))),
            "plan_key" => {
                let id = field(r, op, "identity")?;
                let w = "plan_key.identity";
                let spec = model_spec(field(id, w, "model")?, &format!("{w}.model"))?;
                let g = geometry(field(id, w, "geometry")?, &format!("{w}.geometry"))?;
                let key = KeyParts {
                    family: &spec.family,
                    params: &spec.params,
                    hooks: &spec.hooks,
                    instance: decimal(field(id, w, "instance")?, &format!("{w}.instance"))?,
                    alloc: decimal(field(id, w, "alloc")?, &format!("{w}.alloc"))?,
                    geometry: &g,
                    step_tokens: count(field(id, w, "step_tokens")?, &format!("{w}.step_tokens"))?,
                    window_keying: self.config.window_keying,
                }
                .key();
                Ok(Reply::Ok(dec(key)))
            }
            "session_new" => {
                let step_tokens = match r.get("step_tokens") {
                    None => 1,
                    Some(v) => count(v, "session_new.step_tokens")?,
                };
                if step_tokens == 0 {
                    return Err("session_new.step_tokens: a step has at least one token".into());
                }
                let model = self.model(text(r, op, "model")?)?;
                let cache = self.cache(text(r, op, "cache")?)?;
                let session = Session::build(model, cache, step_tokens, self.config.window_keying);
                self.bind(text(r, op, "handle")?, Object::Session(session));
                ok_null()
            }
            "session_valid" => {
                let step = field(r, op, "step")?;
                let tokens = step_token_count(step, "session_valid.step")?;
                let session = self.session(text(r, op, "session")?)?;
                let model = self.model(text(r, op, "model")?)?;
                let cache = self.cache(text(r, op, "cache")?)?;
                Ok(Reply::Ok(Json::Bool(
                    session.valid_for(model, cache, tokens),
                )))
            }
            "session_validity" => {
                let step = field(r, op, "step")?;
                let tokens = step_token_count(step, "session_validity.step")?;
                let session = self.session(text(r, op, "session")?)?;
                let model = self.model(text(r, op, "model")?)?;
                let cache = self.cache(text(r, op, "cache")?)?;
                let validity = session.validity(model, cache, tokens);
                Ok(Reply::Ok(Json::from(validity.name())))
            }
            "session_rebind" => {
                // The session and the cache live in one map: read what the
                // rebind needs from the cache, then borrow the session.
                let cache = self.cache(text(r, op, "cache")?)?;
                let (incoming, alloc) = (cache.placement().clone(), cache.alloc_id());
                let session = self.session_mut(text(r, op, "session")?)?;
                Ok(match session.rebind(&incoming, alloc) {
                    Ok(()) => Reply::Ok(Json::Null),
                    Err(e) => e.into(),
                })
            }
            "drop" => {
                let name = text(r, op, "handle")?;
                match self.objects.remove(name) {
                    Some(_) => ok_null(),
                    None => Err(format!("drop: no live handle named {name:?}")),
                }
            }
            "measure" | "stamp" => {
                let model = text(r, op, "model")?;
                let layout = match r.get("layout") {
                    None | Some(Json::Null) => None,
                    Some(raw) => Some(layout(raw, &format!("{op}.layout"))?),
                };
                let rules = self
                    .config
                    .profile
                    .writer_rules(layout)
                    .map_err(|e| format!("{op}.{e}"))?;
                let layers = payload(field(r, op, "payload")?, &format!("{op}.payload"))?;
                let measured = if op == "measure" {
                    signature::measure(rules, model, &layers)
                } else {
                    signature::stamp(rules, model, &layers)
                };
                Ok(signature_reply(measured))
            }
            "verify" => {
                let profile = &self.config.profile;
                let recorded = match field(r, op, "recorded")? {
                    Json::Null => None,
                    raw => Some(signature_from(raw, "verify.recorded")?),
                };
                // A stamp of a version this reader reads must have that
                // version's shape; one it does not read is refused by its
                // version alone (`unsupported_format`), whatever else it holds.
                if let Some(stamp) = &recorded {
                    if profile.reads.contains(&stamp.format_version) {
                        layout_matches_version(stamp, "verify.recorded")?;
                    }
                }
                let layers = payload(field(r, op, "payload")?, "verify.payload")?;
                // The expectation is only compared, never measured: whatever
                // its shape, it is judged field by field in step 5.
                let expected = signature_from(field(r, op, "expected")?, "verify.expected")?;
                Ok(signature_reply(verify::verify(
                    profile,
                    recorded.as_ref(),
                    &layers,
                    &expected,
                )))
            }
            op if prefix_ops::OPS.contains(&op) => self.prefix_op(op, r),
            // Every class is declared, so `unsupported` (PROTO-23) never applies:
            // an operation nobody defined is an undecodable request (PROTO-9).
            other => Err(format!("unknown operation {other:?}")),
        }
    }

    fn bind(&mut self, name: &str, object: Object) {
        if let Some(old) = self.objects.insert(name.to_string(), object) {
            eprintln!(
                "{NAME}: handle {name:?} rebound while still naming {}",
                old.kind()
            );
        }
    }

    fn get(&self, name: &str) -> Result<&Object, String> {
        self.objects
            .get(name)
            .ok_or_else(|| format!("no live handle named {name:?}"))
    }

    fn get_mut(&mut self, name: &str) -> Result<&mut Object, String> {
        self.objects
            .get_mut(name)
            .ok_or_else(|| format!("no live handle named {name:?}"))
    }

    fn model(&self, name: &str) -> Result<&Model, String> {
        match self.get(name)? {
            Object::Model(m) => Ok(m),
            other => Err(format!(
                "handle {name:?} names {}, not a model",
                other.kind()
            )),
        }
    }

    fn model_mut(&mut self, name: &str) -> Result<&mut Model, String> {
        match self.get_mut(name)? {
            Object::Model(m) => Ok(m),
            other => Err(format!(
                "handle {name:?} names {}, not a model",
                other.kind()
            )),
        }
    }

    fn cache(&self, name: &str) -> Result<&KvCache, String> {
        match self.get(name)? {
            Object::Cache(c) => Ok(c),
            other => Err(format!(
                "handle {name:?} names {}, not a cache",
                other.kind()
            )),
        }
    }

    fn cache_mut(&mut self, name: &str) -> Result<&mut KvCache, String> {
        match self.get_mut(name)? {
            Object::Cache(c) => Ok(c),
            other => Err(format!(
                "handle {name:?} names {}, not a cache",
                other.kind()
            )),
        }
    }

    fn session(&self, name: &str) -> Result<&Session, String> {
        match self.get(name)? {
            Object::Session(s) => Ok(s),
            other => Err(format!(
                "handle {name:?} names {}, not a session",
                other.kind()
            )),
        }
    }

    fn session_mut(&mut self, name: &str) -> Result<&mut Session, String> {
        match self.get_mut(name)? {
            Object::Session(s) => Ok(s),
            other => Err(format!(
                "handle {name:?} names {}, not a session",
                other.kind()
            )),
        }
    }
}

fn ok_null() -> Outcome {
    Ok(Reply::Ok(Json::Null))
}

fn hello(r: &Json, config: &Config) -> Outcome {
    // PROTO-11: a version not spoken (or none named) is answered `failure`,
    // naming the one this adapter speaks.
    match r.get("protocol") {
        Some(Json::Int(PROTOCOL)) => {}
        other => {
            return Err(format!(
                "hello.protocol: {} is not supported; this adapter speaks protocol {PROTOCOL}",
                other.map_or("a missing version".to_string(), Json::to_line)
            ))
        }
    }
    if let Some(suite) = r.get("suite").and_then(Json::as_str) {
        eprintln!("{NAME} {VERSION}: hello from suite {suite}");
    }
    let profile = &config.profile;
    let mut fields = vec![
        ("name", Json::from(NAME)),
        ("version", Json::from(VERSION)),
        ("language", Json::from("rust")),
        ("protocol", Json::Int(PROTOCOL)),
        (
            "classes",
            Json::Arr(CLASSES.iter().map(|&c| Json::from(c)).collect()),
        ),
        (
            "format",
            Json::obj([
                ("writes", Json::from(profile.writes)),
                (
                    "reads",
                    Json::Arr(profile.reads.iter().map(|&v| Json::from(v)).collect()),
                ),
            ]),
        ),
    ];
    // Options at their default are left out (CONF-6: an option left out
    // takes its default), so the default declaration is the v1 one.
    let mut options = vec![];
    if profile.revision != Revision::default() {
        options.push(("profile_v2_revision", Json::from(profile.revision.name())));
    }
    if config.window_keying != WindowKeying::default() {
        options.push(("plan_key_window", Json::from(config.window_keying.name())));
    }
    options.extend(
        config
            .prefix
            .declared()
            .into_iter()
            .map(|(name, value)| (name, Json::from(value))),
    );
    if !options.is_empty() {
        fields.push(("options", Json::obj(options)));
    }
    if config.prefix.partial != Partial::Tokens {
        // its prefix caches can be bounded (PREFIX-24): each checkpoint is a block
        fields.push((
            "capabilities",
            Json::obj([("prefix_capacity", Json::Bool(true))]),
        ));
    }
    Ok(Reply::Ok(Json::obj(fields)))
}

fn signature_reply(result: Result<Signature, KvError>) -> Reply {
    match result {
        Ok(sig) => Reply::Ok(signature_to(&sig)),
        Err(e) => e.into(),
    }
}

// Hash programs ---------------------------------------------------------------

/// Run a mix program from a fresh hasher: one decimal string per `finish`.
fn run_program(raw: &Json, at: &str) -> Result<Json, String> {
    let ops = array(raw, at)?;
    let mut h = KeyHasher::new();
    let mut finishes = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let w = format!("{at}[{i}]");
        let kind = match op.get("op") {
            Some(Json::Str(k)) => k.as_str(),
            _ => return Err(format!("{w}.op: expected a mix op name")),
        };
        match kind {
            "bytes" => {
                let bytes = hex_bytes(field(op, &w, "hex")?, &format!("{w}.hex"))?;
                let repeat = match op.get("repeat") {
                    None => 1,
                    Some(v) => count(v, &format!("{w}.repeat"))?,
                };
                if repeat == 0 {
                    return Err(format!("{w}.repeat: expected a positive integer"));
                }
                for _ in 0..repeat {
                    h.fold(&bytes);
                }
            }
            "str" => {
                h.str(text(op, &w, "value")?);
            }
            "u64" => {
                h.u64(decimal(field(op, &w, "value")?, &format!("{w}.value"))?);
            }
            "instance" => {
                h.instance(decimal(field(op, &w, "value")?, &format!("{w}.value"))?);
            }
            "f64" => {
                h.f64_bits(bits(field(op, &w, "bits")?, &format!("{w}.bits"))?);
            }
            "present" => {
                h.present(boolean(field(op, &w, "value")?, &format!("{w}.value"))?);
            }
            "finish" => finishes.push(dec(h.finish())),
            other => return Err(format!("{w}.op: unknown mix op {other:?}")),
        }
    }
    Ok(Json::Arr(finishes))
}

fn hex_bytes(raw: &Json, at: &str) -> Result<Vec<u8>, String> {
    let s = raw
        .as_str()
        .ok_or_else(|| format!("{at}: expected a hex string"))?;
    if s.len() % 2 != 0 {
        return Err(format!("{at}: odd number of hex digits"));
    }
    s.as_bytes()
        .chunks(2)
        .map(|pair| {
            let hi = (pair[0] as char).to_digit(16);
            let lo = (pair[1] as char).to_digit(16);
            match (hi, lo) {
                (Some(hi), Some(lo)) => Ok((hi * 16 + lo) as u8),
                _ => Err(format!("{at}: not a hex string")),
            }
        })
        .collect()
}

// Field decoding ----------------------------------------------------------------

fn field<'a>(obj: &'a Json, at: &str, name: &str) -> Result<&'a Json, String> {
    match obj {
        Json::Obj(_) => obj.get(name).ok_or_else(|| format!("{at}.{name}: missing")),
        other => Err(format!(
            "{at}: expected an object, got {}",
            other.type_name()
        )),
    }
}

fn text<'a>(obj: &'a Json, at: &str, name: &str) -> Result<&'a str, String> {
    match field(obj, at, name)? {
        Json::Str(s) => Ok(s),
        other => Err(format!(
            "{at}.{name}: expected a string, got {}",
            other.type_name()
        )),
    }
}

fn array<'a>(raw: &'a Json, at: &str) -> Result<&'a [Json], String> {
    raw.as_array()
        .ok_or_else(|| format!("{at}: expected an array, got {}", raw.type_name()))
}

fn object<'a>(raw: &'a Json, at: &str) -> Result<&'a [(String, Json)], String> {
    raw.as_object()
        .ok_or_else(|| format!("{at}: expected an object, got {}", raw.type_name()))
}

fn boolean(raw: &Json, at: &str) -> Result<bool, String> {
    raw.as_bool()
        .ok_or_else(|| format!("{at}: expected true or false, got {}", raw.type_name()))
}

/// A small count: a non-negative JSON integer that fits in a u64.
fn count(raw: &Json, at: &str) -> Result<u64, String> {
    match raw {
        Json::Int(i) => u64::try_from(*i)
            .map_err(|_| format!("{at}: expected a non-negative integer below 2^64, got {i}")),
        other => Err(format!(
            "{at}: expected a non-negative integer, got {}",
            other.type_name()
        )),
    }
}

/// A 64-bit integer on the wire: a decimal string, refused (never reduced)
/// outside 0 .. 2^64-1 (HASH-12).
fn decimal(raw: &Json, at: &str) -> Result<u64, String> {
    let s = raw
        .as_str()
        .ok_or_else(|| format!("{at}: expected a decimal string, got {}", raw.type_name()))?;
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{at}: expected a decimal string, got {s:?}"));
    }
    s.parse::<u64>()
        .map_err(|_| format!("{at}: {s} does not fit in 64 bits"))
}

/// A binary64 bit pattern: `"0x"` and 16 hex digits.
fn bits(raw: &Json, at: &str) -> Result<u64, String> {
    let s = raw
        .as_str()
        .ok_or_else(|| format!("{at}: expected \"0x\" and 16 hex digits"))?;
    match s.strip_prefix("0x") {
        Some(hex) if hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(u64::from_str_radix(hex, 16).expect("checked digits"))
        }
        _ => Err(format!(
            "{at}: expected \"0x\" and 16 hex digits, got {s:?}"
        )),
    }
}

fn dec(v: u64) -> Json {
    Json::Str(v.to_string())
}

fn model_spec(raw: &Json, at: &str) -> Result<ModelSpec, String> {
    object(raw, at)?;
    let family = text(raw, at, "family")?.to_string();
    let mut params = BTreeMap::new();
    if let Some(p) = raw.get("params") {
        for (name, value) in object(p, &format!("{at}.params"))? {
            let w = format!("{at}.params.{name}");
            let tagged = object(value, &w)?;
            let param = match tagged {
                [(tag, v)] if tag == "u64" => Param::U64(decimal(v, &format!("{w}.u64"))?),
                [(tag, v)] if tag == "f64" => Param::F64Bits(bits(v, &format!("{w}.f64"))?),
                [(tag, Json::Str(s))] if tag == "str" => Param::Str(s.clone()),
                _ => {
                    return Err(format!(
                        "{w}: expected {{\"u64\"|\"f64\"|\"str\": value}}, got {}",
                        value.to_line()
                    ))
                }
            };
            params.insert(name.clone(), param);
        }
    }
    let mut hooks = BTreeMap::new();
    if let Some(h) = raw.get("hooks") {
        for (name, value) in object(h, &format!("{at}.hooks"))? {
            hooks.insert(name.clone(), boolean(value, &format!("{at}.hooks.{name}"))?);
        }
    }
    Ok(ModelSpec {
        family,
        params,
        hooks,
    })
}

fn geometry(raw: &Json, at: &str) -> Result<Geometry, String> {
    let n = |name: &str| count(field(raw, at, name)?, &format!("{at}.{name}"));
    Ok(Geometry {
        n_layers: n("n_layers")?,
        n_kv_heads: n("n_kv_heads")?,
        head_dim: n("head_dim")?,
        max_seq_len: n("max_seq_len")?,
        dtype: match raw.get("dtype") {
            None => "f32".to_string(),
            Some(Json::Str(s)) => s.clone(),
            Some(other) => {
                return Err(format!(
                    "{at}.dtype: expected a string, got {}",
                    other.type_name()
                ))
            }
        },
    })
}

/// The number of tokens in a step, the only structural part of it (PLAN-6).
/// The rest is read only to reject a malformed request; none of it is kept.
fn step_token_count(step: &Json, at: &str) -> Result<u64, String> {
    object(step, at)?;
    let tokens = match step.get("token_ids") {
        None => 0,
        Some(ids) => array(ids, &format!("{at}.token_ids"))?.len() as u64,
    };
    if let Some(mask) = step.get("mask") {
        array(mask, &format!("{at}.mask"))?;
    }
    if let Some(rope) = step.get("rope") {
        object(rope, &format!("{at}.rope"))?;
    }
    Ok(tokens)
}

/// Build real f32 buffers of the described lengths (the payload's evidence).
fn payload(raw: &Json, at: &str) -> Result<Vec<StoredLayer>, String> {
    let items = array(raw, at)?;
    let mut descs = Vec::with_capacity(items.len());
    let mut total: u128 = 0;
    for (i, item) in items.iter().enumerate() {
        let w = format!("{at}[{i}]");
        object(item, &w)?;
        let n = |name: &str| count(field(item, &w, name)?, &format!("{w}.{name}"));
        let v_head_dim = match item.get("v_head_dim") {
            None | Some(Json::Null) => None,
            Some(v) => Some(count(v, &format!("{w}.v_head_dim"))?),
        };
        let d = (
            n("n_kv_heads")?,
            n("head_dim")?,
            v_head_dim,
            n("seq_len")?,
            n("k_len")?,
            n("v_len")?,
        );
        total += d.4 as u128 + d.5 as u128;
        descs.push(d);
    }
    if total > MAX_PAYLOAD_ELEMENTS {
        return Err(format!(
            "{at}: {total} elements is more than this adapter allocates ({MAX_PAYLOAD_ELEMENTS})"
        ));
    }
    Ok(descs
        .into_iter()
        .enumerate()
        .map(
            |(index, (n_kv_heads, head_dim, v_head_dim, seq_len, k_len, v_len))| StoredLayer {
                n_kv_heads,
                head_dim,
                v_head_dim,
                seq_len,
                k: (0..k_len)
                    .map(|j| (j % 4093) as f32 * 0.25 + index as f32)
                    .collect(),
                v: (0..v_len)
                    .map(|j| (j % 4093) as f32 * -0.25 - index as f32)
                    .collect(),
            },
        )
        .collect())
}

/// A layout: `{"block_size": n, "sliding_window": n | null}`, both keys
/// present. Only the types are checked here; a zero block or window, or a
/// misaligned one, is a `bad_layout` refusal, decided when measuring.
fn layout(raw: &Json, at: &str) -> Result<Layout, String> {
    object(raw, at)?;
    let block_size = count(field(raw, at, "block_size")?, &format!("{at}.block_size"))?;
    let sliding_window = match field(raw, at, "sliding_window")? {
        Json::Null => None,
        w => Some(count(w, &format!("{at}.sliding_window"))?),
    };
    Ok(Layout {
        block_size,
        sliding_window,
    })
}

fn layout_to(layout: &Layout) -> Json {
    Json::obj([
        ("block_size", Json::from(layout.block_size)),
        (
            "sliding_window",
            layout.sliding_window.map_or(Json::Null, Json::from),
        ),
    ])
}

/// A signature, with its layout when it has one (whatever its version: a
/// reader must be able to refuse a stamp by its version first).
fn signature_from(raw: &Json, at: &str) -> Result<Signature, String> {
    object(raw, at)?;
    let n = |name: &str| count(field(raw, at, name)?, &format!("{at}.{name}"));
    Ok(Signature {
        format_version: n("format_version")?,
        model: text(raw, at, "model")?.to_string(),
        n_layers: n("n_layers")?,
        n_kv_heads: n("n_kv_heads")?,
        head_dim: n("head_dim")?,
        dtype: text(raw, at, "dtype")?.to_string(),
        tokens: n("tokens")?,
        layout: match raw.get("layout") {
            None | Some(Json::Null) => None,
            Some(l) => Some(layout(l, &format!("{at}.layout"))?),
        },
    })
}

/// A v1 signature has no layout and a v2 one has one; other versions are
/// left alone (no reader measures them).
fn layout_matches_version(sig: &Signature, at: &str) -> Result<(), String> {
    match (sig.format_version, sig.layout.is_some()) {
        (1, true) => Err(format!(
            "{at}.layout: a format_version 1 signature has none"
        )),
        (2, false) => Err(format!("{at}.layout: missing; format_version 2 needs one")),
        _ => Ok(()),
    }
}

fn signature_to(sig: &Signature) -> Json {
    let mut fields = vec![
        ("format_version", Json::from(sig.format_version)),
        ("model", Json::from(sig.model.as_str())),
        ("n_layers", Json::from(sig.n_layers)),
        ("n_kv_heads", Json::from(sig.n_kv_heads)),
        ("head_dim", Json::from(sig.head_dim)),
        ("dtype", Json::from(sig.dtype.as_str())),
        ("tokens", Json::from(sig.tokens)),
    ];
    if let Some(layout) = &sig.layout {
        fields.push(("layout", layout_to(layout)));
    }
    Json::obj(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    pub(super) fn ask(a: &mut Adapter, line: &str) -> Json {
        let req = parse(line).unwrap();
        let (reply, _) = a.handle(&req);
        envelope(req.get("seq").cloned().unwrap_or(Json::Null), reply)
    }

    #[test]
    fn hello_declares_everything() {
        let mut a = Adapter::new();
        let r = ask(
            &mut a,
            r#"{"seq": 0, "op": "hello", "protocol": 1, "suite": "1.0.0"}"#,
        );
        let ok = r.get("ok").unwrap();
        assert_eq!(ok.get("name").and_then(Json::as_str), Some(NAME));
        assert_eq!(ok.get("language").and_then(Json::as_str), Some("rust"));
        assert_eq!(
            ok.get("classes").and_then(Json::as_array).map(|c| c.len()),
            Some(7)
        );
        assert_eq!(ok.get("format").unwrap().get("writes"), Some(&Json::Int(1)));
        assert_eq!(
            ok.get("format").unwrap().get("reads"),
            Some(&Json::Arr(vec![Json::Int(1)]))
        );
        // Only the prefix_cache options it does not answer by default.
        assert_eq!(
            ok.get("options").unwrap().to_line(),
            json_line(r#"{"prefix_salt_scope":"every_block","prefix_tier":"shared"}"#)
        );
        for bad in [
            r#"{"seq": 0, "op": "hello", "protocol": 2}"#,
            r#"{"seq": 0, "op": "hello"}"#,
        ] {
            let r = ask(&mut a, bad);
            assert!(r
                .get("failure")
                .and_then(Json::as_str)
                .unwrap()
                .contains("protocol 1"));
        }
    }

    #[test]
    fn a_plan_scenario_by_hand() {
        let mut a = Adapter::new();
        for line in [
            r#"{"seq": 1, "op": "model_new", "handle": "m", "spec": {"family": "llama", "params": {"n": {"u64": "2"}, "eps": {"f64": "0x3ee4f8b588e368f1"}, "mask": {"str": "causal"}}, "hooks": {"lora": false}}}"#,
            r#"{"seq": 2, "op": "cache_new", "handle": "c", "geometry": {"n_layers": 2, "n_kv_heads": 2, "head_dim": 4, "max_seq_len": 16, "dtype": "f32"}}"#,
            r#"{"seq": 3, "op": "session_new", "handle": "p", "model": "m", "cache": "c", "step_tokens": 1}"#,
            r#"{"seq": 4, "op": "cache_append", "cache": "c", "tokens": 6}"#,
        ] {
            assert_eq!(ask(&mut a, line).get("ok"), Some(&Json::Null), "{line}");
        }
        let check = r#"{"seq": 5, "op": "session_valid", "session": "p", "model": "m", "cache": "c", "step": {"token_ids": [9], "write_offset": 6, "rope": {"theta": 500000.0, "scaling": 8.0}, "mask": [1, 0]}}"#;
        assert_eq!(ask(&mut a, check).get("ok"), Some(&Json::Bool(true)));
        let r = ask(
            &mut a,
            r#"{"seq": 6, "op": "model_set_hook", "model": "m", "hook": "lora", "present": true}"#,
        );
        assert_eq!(r.get("ok"), Some(&Json::Null));
        // A hook the configuration does not declare: a usage error, nothing changes.
        let r = ask(
            &mut a,
            r#"{"seq": 6, "op": "model_set_hook", "model": "m", "hook": "sampler", "present": false}"#,
        );
        assert!(r.get("failure").is_some());
        assert_eq!(ask(&mut a, check).get("ok"), Some(&Json::Bool(false)));
        let r = ask(
            &mut a,
            r#"{"seq": 7, "op": "cache_append", "cache": "c", "tokens": 11}"#,
        );
        let err = r.get("error").unwrap();
        assert_eq!(
            err.get("kind").and_then(Json::as_str),
            Some("capacity_exceeded")
        );
        assert_eq!(
            err.get("values").unwrap().get("requested"),
            Some(&Json::Int(17))
        );
        ask(&mut a, r#"{"seq": 8, "op": "drop", "handle": "m"}"#);
        assert!(ask(&mut a, check).get("failure").is_some());
        ask(&mut a, r#"{"seq": 9, "op": "reset"}"#);
        assert!(
            ask(&mut a, r#"{"seq": 10, "op": "cache_len", "cache": "c"}"#)
                .get("failure")
                .is_some()
        );
        assert!(ask(&mut a, r#"{"seq": 11, "op": "teleport"}"#)
            .get("failure")
            .is_some());
    }

    #[test]
    fn hash_requests() {
        let mut a = Adapter::new();
        let r = ask(
            &mut a,
            r#"{"seq": 1, "op": "hash", "program": [{"op": "bytes", "hex": "61"}, {"op": "finish"}, {"op": "bytes", "hex": "", "repeat": 3}, {"op": "finish"}]}"#,
        );
        assert_eq!(
            r.get("ok"),
            Some(&Json::Arr(vec![
                dec(0xaf63dc4c8601ec8c),
                dec(0xaf63dc4c8601ec8c)
            ]))
        );
        let r = ask(
            &mut a,
            r#"{"seq": 2, "op": "hash", "program": [{"op": "u64", "value": "18446744073709551616"}, {"op": "finish"}]}"#,
        );
        assert!(r.get("failure").is_some());
        let r = ask(
            &mut a,
            r#"{"seq": 3, "op": "hash_batch", "programs": [[{"op": "finish"}], [{"op": "str", "value": "ab"}, {"op": "str", "value": "c"}, {"op": "finish"}]]}"#,
        );
        assert_eq!(
            r.get("ok"),
            Some(&Json::Arr(vec![
                Json::Arr(vec![dec(0xcbf29ce484222325)]),
                Json::Arr(vec![dec(0x5091916f8ceeb7b0)]),
            ]))
        );
    }

    pub(super) fn adapter(flags: &str) -> Adapter {
        match crate::config::parse_args(flags.split_whitespace().map(String::from)) {
            Ok(crate::config::Invocation::Serve(c)) => Adapter::with_config(c),
            other => panic!("{flags}: {other:?}"),
        }
    }

    fn error_kind(r: &Json) -> Option<&str> {
        r.get("error")?.get("kind")?.as_str()
    }

    #[test]
    fn hello_declares_the_flags() {
        let mut a =
            adapter("--writes 2 --reads 1,2 --v2-revision layout_only --plan-key-window structure");
        let r = ask(
            &mut a,
            r#"{"seq": 0, "op": "hello", "protocol": 1, "suite": "2.2.0"}"#,
        );
        let ok = r.get("ok").unwrap();
        assert_eq!(
            ok.get("format").unwrap().to_line(),
            json_line(r#"{"writes":2,"reads":[1,2]}"#)
        );
        assert_eq!(
            ok.get("options").unwrap().to_line(),
            json_line(
                r#"{"profile_v2_revision":"layout_only","plan_key_window":"structure","prefix_salt_scope":"every_block","prefix_tier":"shared"}"#
            )
        );
        assert!(ok
            .get("classes")
            .unwrap()
            .as_array()
            .unwrap()
            .contains(&Json::from("plan_validity")));
    }

    const PAYLOAD: &str = r#"[{"n_kv_heads": 2, "head_dim": 8, "seq_len": 4, "k_len": 64, "v_len": 64}, {"n_kv_heads": 2, "head_dim": 8, "seq_len": 4, "k_len": 64, "v_len": 64}]"#;

    #[test]
    fn v2_writers_stamp_under_the_layout_they_are_given() {
        let mut a = adapter("--writes 2");
        let stamp = format!(
            r#"{{"seq": 1, "op": "stamp", "model": "m", "layout": {{"block_size": 4, "sliding_window": 8}}, "payload": {PAYLOAD}}}"#
        );
        let r = ask(&mut a, &stamp);
        assert_eq!(
            r.get("ok").unwrap().to_line(),
            json_line(
                r#"{"format_version":2,"model":"m","n_layers":2,"n_kv_heads":2,"head_dim":8,"dtype":"f32","tokens":4,"layout":{"block_size":4,"sliding_window":8}}"#
            )
        );
        let full = format!(
            r#"{{"seq": 1, "op": "measure", "model": "m", "layout": {{"block_size": 4, "sliding_window": null}}, "payload": {PAYLOAD}}}"#
        );
        let r = ask(&mut a, &full);
        assert_eq!(
            r.get("ok").unwrap().get("layout").unwrap().to_line(),
            json_line(r#"{"block_size":4,"sliding_window":null}"#)
        );
        let bad = r#"{"seq": 1, "op": "stamp", "model": "m", "layout": {"block_size": 3, "sliding_window": 8}, "payload": []}"#;
        let r = ask(&mut a, bad);
        assert_eq!(error_kind(&r), Some("bad_layout"));
        assert_eq!(
            r.get("error").unwrap().get("values").unwrap().to_line(),
            json_line(r#"{"block_size":3,"sliding_window":8,"remainder":2}"#)
        );
        // No layout for a v2 writer, or one for a v1 writer: a usage error.
        let none = format!(r#"{{"seq": 1, "op": "stamp", "model": "m", "payload": {PAYLOAD}}}"#);
        assert!(ask(&mut a, &none).get("failure").is_some());
        assert!(ask(&mut Adapter::new(), &stamp).get("failure").is_some());
        assert!(ask(&mut Adapter::new(), &none).get("ok").is_some());
    }

    #[test]
    fn readers_judge_stamps_by_their_recorded_version() {
        let v2_stamp = r#"{"format_version": 2, "model": "m", "n_layers": 2, "n_kv_heads": 2, "head_dim": 8, "dtype": "f32", "tokens": 4, "layout": {"block_size": 0, "sliding_window": 0}}"#;
        let v1_stamp = r#"{"format_version": 1, "model": "m", "n_layers": 2, "n_kv_heads": 2, "head_dim": 8, "dtype": "f32", "tokens": 4}"#;
        let verify = |recorded: &str, expected: &str| {
            format!(
                r#"{{"seq": 2, "op": "verify", "recorded": {recorded}, "payload": {PAYLOAD}, "expected": {expected}}}"#
            )
        };
        // A v1-only reader: the version, before the impossible layout.
        let r = ask(&mut Adapter::new(), &verify(v2_stamp, v1_stamp));
        assert_eq!(error_kind(&r), Some("unsupported_format"));
        // A v2 reader: the impossible layout, field block_size, null-free values.
        let mut v2 = adapter("--writes 2");
        let r = ask(&mut v2, &verify(v2_stamp, v2_stamp));
        assert_eq!(error_kind(&r), Some("bad_layout"));
        assert_eq!(
            r.get("error").unwrap().get("field"),
            Some(&Json::from("block_size"))
        );
        let r = ask(&mut v2, &verify(v1_stamp, v2_stamp));
        assert_eq!(error_kind(&r), Some("unsupported_format"));
        // A rolling reader reads the v1 block under v1 rules.
        let mut both = adapter("--writes 2 --reads 1,2");
        let r = ask(&mut both, &verify(v1_stamp, v1_stamp));
        assert_eq!(r.get("ok").unwrap().to_line(), json_line(v1_stamp));
        // ... and a v2 block against an expectation without a window.
        let windowed = v2_stamp.replace(
            r#""block_size": 0, "sliding_window": 0"#,
            r#""block_size": 4, "sliding_window": 128"#,
        );
        let full = v2_stamp.replace(
            r#""block_size": 0, "sliding_window": 0"#,
            r#""block_size": 4, "sliding_window": null"#,
        );
        let r = ask(&mut both, &verify(&windowed, &full));
        let e = r.get("error").unwrap();
        assert_eq!(e.get("kind"), Some(&Json::from("incompatible")));
        assert_eq!(
            e.get("values").unwrap().to_line(),
            json_line(r#"{"expected":null,"found":128}"#)
        );
        // A stamp whose shape contradicts its readable version: a usage error.
        let v2_without_layout =
            v1_stamp.replace(r#""format_version": 1"#, r#""format_version": 2"#);
        assert!(ask(&mut both, &verify(&v2_without_layout, v1_stamp))
            .get("failure")
            .is_some());
        // An expectation is only compared: without a layout it differs from
        // a v1 block on format_version, and from a v2 block on block_size.
        let r = ask(&mut Adapter::new(), &verify(v1_stamp, &v2_without_layout));
        assert_eq!(
            r.get("error").unwrap().get("field"),
            Some(&Json::from("format_version"))
        );
        let r = ask(&mut both, &verify(&full, &v2_without_layout));
        let e = r.get("error").unwrap();
        assert_eq!(e.get("kind"), Some(&Json::from("incompatible")));
        assert_eq!(e.get("field"), Some(&Json::from("block_size")));
    }

    fn json_line(text: &str) -> String {
        crate::json::parse(text).unwrap().to_line()
    }

    #[test]
    fn plan_validity_by_hand() {
        let mut a = Adapter::new();
        for line in [
            r#"{"seq": 1, "op": "model_new", "handle": "m", "spec": {"family": "qwen3", "params": {"sliding_window": {"u64": "128"}}, "hooks": {}}}"#,
            r#"{"seq": 2, "op": "cache_new_placed", "handle": "c", "geometry": {"n_layers": 2, "n_kv_heads": 2, "head_dim": 4, "max_seq_len": 16, "dtype": "f32"}, "residency": "cuda:0", "layer_storage": ["p", "p"]}"#,
            r#"{"seq": 3, "op": "cache_new_placed", "handle": "d", "geometry": {"n_layers": 2, "n_kv_heads": 2, "head_dim": 4, "max_seq_len": 16, "dtype": "f32"}, "residency": "cuda:0", "layer_storage": ["p", "q"]}"#,
            r#"{"seq": 4, "op": "cache_new", "handle": "e", "geometry": {"n_layers": 2, "n_kv_heads": 2, "head_dim": 4, "max_seq_len": 16, "dtype": "f32"}}"#,
            r#"{"seq": 5, "op": "session_new", "handle": "s", "model": "m", "cache": "c", "step_tokens": 1}"#,
        ] {
            assert_eq!(ask(&mut a, line).get("ok"), Some(&Json::Null), "{line}");
        }
        let validity = |a: &mut Adapter, cache: &str| {
            let line = format!(
                r#"{{"seq": 6, "op": "session_validity", "session": "s", "model": "m", "cache": "{cache}", "step": {{"token_ids": [1]}}}}"#
            );
            ask(a, &line)
                .get("ok")
                .and_then(Json::as_str)
                .map(String::from)
        };
        let rebind = |a: &mut Adapter, cache: &str| {
            ask(
                a,
                &format!(
                    r#"{{"seq": 7, "op": "session_rebind", "session": "s", "cache": "{cache}"}}"#
                ),
            )
        };
        assert_eq!(validity(&mut a, "c").as_deref(), Some("valid"));
        assert_eq!(validity(&mut a, "d").as_deref(), Some("allocation_changed"));
        let r = rebind(&mut a, "d");
        let e = r.get("error").unwrap();
        assert_eq!(e.get("kind"), Some(&Json::from("storage_differs")));
        assert_eq!(e.get("layer"), Some(&Json::Int(1)));
        assert_eq!(
            e.get("values").unwrap().to_line(),
            json_line(r#"{"which":"k","baked":"p","incoming":"q"}"#)
        );
        let r = rebind(&mut a, "e");
        assert_eq!(
            r.get("error").unwrap().get("values").unwrap().to_line(),
            json_line(r#"{"baked":"cuda:0","incoming":"default"}"#)
        );
        assert_eq!(validity(&mut a, "c").as_deref(), Some("valid"));
        // Clear keeps the placement: the plan can follow its own cache.
        ask(&mut a, r#"{"seq": 8, "op": "cache_clear", "cache": "c"}"#);
        assert_eq!(validity(&mut a, "c").as_deref(), Some("allocation_changed"));
        assert_eq!(rebind(&mut a, "c").get("ok"), Some(&Json::Null));
        assert_eq!(validity(&mut a, "c").as_deref(), Some("valid"));
        // Usage errors: a wrong label count, a handle of the wrong kind.
        let short = r#"{"seq": 9, "op": "cache_new_placed", "handle": "x", "geometry": {"n_layers": 2, "n_kv_heads": 2, "head_dim": 4, "max_seq_len": 16, "dtype": "f32"}, "residency": null, "layer_storage": ["p"]}"#;
        assert!(ask(&mut a, short).get("failure").is_some());
        assert!(rebind(&mut a, "m").get("failure").is_some());
    }

    #[test]
    fn the_window_parameter_follows_the_option() {
        let key = |a: &mut Adapter, window: &str| {
            let line = format!(
                r#"{{"seq": 1, "op": "plan_key", "identity": {{"model": {{"family": "qwen3", "params": {{"sliding_window": {{"u64": "{window}"}}, "mask_structure": {{"str": "split"}}}}, "hooks": {{}}}}, "instance": "5", "alloc": "9", "geometry": {{"n_layers": 2, "n_kv_heads": 2, "head_dim": 4, "max_seq_len": 16, "dtype": "f32"}}, "step_tokens": 1}}}}"#
            );
            ask(a, &line).get("ok").unwrap().clone()
        };
        let mut keyed = Adapter::new();
        assert_ne!(key(&mut keyed, "128"), key(&mut keyed, "256"));
        let mut structure = adapter("--plan-key-window structure");
        assert_eq!(key(&mut structure, "128"), key(&mut structure, "256"));
    }

    /// Every vector of `../../vectors`, through the `hash` request's program
    /// decoder (`vectors.rs` runs them through the hasher directly).
    #[test]
    fn known_answer_vectors() {
        let (vectors, ids_in_text) = crate::vectors::load();
        let mut checked = 0;
        for v in &vectors {
            let got = run_program(&v.ops, &v.id).unwrap_or_else(|e| panic!("vector {}: {e}", v.id));
            let want: Vec<Json> = v.expect.iter().map(|&x| dec(x)).collect();
            assert_eq!(got, Json::Arr(want), "vector {} ({})", v.id, v.file);
            checked += 1;
        }
        assert_eq!(
            checked, ids_in_text,
            "checked {checked} vectors, the files hold {ids_in_text}"
        );
        eprintln!("{checked} known-answer vectors checked through the protocol decoder");
    }
}
