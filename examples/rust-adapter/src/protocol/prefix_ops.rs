//! The operations of the class `prefix_cache` (spec/protocol.md): decoding
//! their fields and binding what they make to handles. The rules live in
//! `prefix.rs`; this file only translates.

use std::cell::RefCell;
use std::rc::Rc;

use super::{count, field, ok_null, text, Adapter, Object, Outcome, Reply};
use crate::json::Json;
use crate::prefix::{EmptySalt, Engine, Lora, PrefixCache, Request, SharedTier, Span, Tier};

/// The operations this file answers.
pub const OPS: [&str; 10] = [
    "prefix_new",
    "tier_new",
    "prefix_attach",
    "lora_load",
    "request_new",
    "request_lora",
    "request_media",
    "request_embeds",
    "prefix_store",
    "prefix_lookup",
];

/// What a handle of this class names.
pub enum PrefixObject {
    Cache(PrefixCache),
    Tier(Tier),
    Lora(Lora),
    Request(Request),
}

impl PrefixObject {
    pub fn kind(&self) -> &'static str {
        match self {
            PrefixObject::Cache(_) => "a prefix cache",
            PrefixObject::Tier(_) => "a shared tier",
            PrefixObject::Lora(_) => "an adapter (LoRA)",
            PrefixObject::Request(_) => "a request",
        }
    }
}

impl Adapter {
    pub(super) fn prefix_op(&mut self, op: &str, r: &Json) -> Outcome {
        match op {
            "prefix_new" => {
                let block_size = count(field(r, op, "block_size")?, "prefix_new.block_size")?;
                let engine = Engine {
                    model: text(r, op, "model")?.to_string(),
                    kv_dtype: text(r, op, "kv_dtype")?.to_string(),
                    layout: text(r, op, "layout")?.to_string(),
                    shard: text(r, op, "shard")?.to_string(),
                };
                let mut cache = PrefixCache::new(block_size, engine, self.config.prefix)
                    .map_err(|e| format!("prefix_new.{e}"))?;
                match r.get("capacity") {
                    None | Some(Json::Null) => {}
                    Some(raw) => cache
                        .bound(count(raw, "prefix_new.capacity")?)
                        .map_err(|e| format!("prefix_new.{e}"))?,
                }
                self.bind_prefix(text(r, op, "handle")?, PrefixObject::Cache(cache));
                ok_null()
            }
            "tier_new" => {
                let tier = SharedTier::open(optional_text(r, op, "storage")?)
                    .map_err(|e| format!("tier_new.{e}"))?;
                let tier: Tier = Rc::new(RefCell::new(tier));
                self.bind_prefix(text(r, op, "handle")?, PrefixObject::Tier(tier));
                ok_null()
            }
            "prefix_attach" => {
                let tier = match self.prefix_object(text(r, op, "tier")?)? {
                    PrefixObject::Tier(tier) => tier.clone(),
                    other => return Err(format!("prefix_attach.tier: names {}", other.kind())),
                };
                self.prefix_cache(text(r, op, "prefix")?)?.attach(tier);
                ok_null()
            }
            "lora_load" => {
                // The process it is loaded into must exist; the instance it
                // gets is never recycled, whatever the process. The name is
                // read (it must be a string) and then left out on purpose.
                self.prefix_cache(text(r, op, "prefix")?)?;
                let _name = text(r, op, "adapter_name")?;
                let lora = Lora::load(text(r, op, "weights")?);
                self.bind_prefix(text(r, op, "handle")?, PrefixObject::Lora(lora));
                ok_null()
            }
            "request_new" => {
                let salt = optional_text(r, op, "salt")?;
                if salt == Some("") && self.config.prefix.empty_salt == EmptySalt::Refuse {
                    return Ok(empty_salt_refused());
                }
                let user_key = optional_text(r, op, "user_key")?;
                let request = Request::new(text(r, op, "tokens")?, salt, user_key)
                    .map_err(|e| format!("request_new.tokens: {e}"))?;
                self.bind_prefix(text(r, op, "handle")?, PrefixObject::Request(request));
                ok_null()
            }
            "request_lora" => {
                let lora = match self.prefix_object(text(r, op, "lora")?)? {
                    PrefixObject::Lora(lora) => lora.clone(),
                    other => return Err(format!("request_lora.lora: names {}", other.kind())),
                };
                self.request(text(r, op, "request")?)?.lora = Some(lora);
                ok_null()
            }
            "request_media" => {
                let at = |name: &str| format!("request_media.{name}");
                let placement = (
                    count(field(r, op, "start")?, &at("start"))?,
                    count(field(r, op, "length")?, &at("length"))?,
                );
                let shape = (
                    count(field(r, op, "width")?, &at("width"))?,
                    count(field(r, op, "height")?, &at("height"))?,
                );
                let caller_id = optional_text(r, op, "caller_id")?;
                let span = Span::media(placement, text(r, op, "content")?, shape, caller_id);
                self.request(text(r, op, "request")?)?.spans.push(span);
                ok_null()
            }
            "request_embeds" => {
                let start = count(field(r, op, "start")?, "request_embeds.start")?;
                let length = count(field(r, op, "length")?, "request_embeds.length")?;
                let span = Span::embeds(start, length, text(r, op, "content")?);
                self.request(text(r, op, "request")?)?.spans.push(span);
                ok_null()
            }
            "prefix_store" | "prefix_lookup" => {
                // The request is copied out so the cache can be borrowed alone.
                let request = self.request(text(r, op, "request")?)?.clone();
                let cache = self.prefix_cache(text(r, op, "prefix")?)?;
                if op == "prefix_store" {
                    cache.store(&request)?;
                    ok_null()
                } else {
                    Ok(Reply::Ok(Json::from(cache.lookup(&request))))
                }
            }
            other => Err(format!("unknown operation {other:?}")),
        }
    }

    fn bind_prefix(&mut self, name: &str, object: PrefixObject) {
        self.bind(name, Object::Prefix(object));
    }

    fn prefix_object(&mut self, name: &str) -> Result<&mut PrefixObject, String> {
        match self.get_mut(name)? {
            Object::Prefix(p) => Ok(p),
            other => Err(format!("handle {name:?} names {}", other.kind())),
        }
    }

    fn prefix_cache(&mut self, name: &str) -> Result<&mut PrefixCache, String> {
        match self.prefix_object(name)? {
            PrefixObject::Cache(cache) => Ok(cache),
            other => Err(format!(
                "handle {name:?} names {}, not a prefix cache",
                other.kind()
            )),
        }
    }

    fn request(&mut self, name: &str) -> Result<&mut Request, String> {
        match self.prefix_object(name)? {
            PrefixObject::Request(request) => Ok(request),
            other => Err(format!(
                "handle {name:?} names {}, not a request",
                other.kind()
            )),
        }
    }
}

/// A string field that may be null or left out (both: absent).
fn optional_text<'a>(r: &'a Json, op: &str, name: &str) -> Result<Option<&'a str>, String> {
    match r.get(name) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::Str(s)) => Ok(Some(s)),
        Some(other) => Err(format!(
            "{op}.{name}: expected a string or null, got {}",
            other.type_name()
        )),
    }
}

/// The refusal of an empty salt under `prefix_empty_salt: refuse`
/// (PREFIX-14): an empty salt is never read as no salt.
fn empty_salt_refused() -> Reply {
    Reply::Refusal(Json::obj([
        ("kind", Json::from("empty_salt")),
        ("field", Json::from("salt")),
        ("layer", Json::Null),
        ("values", Json::obj(Vec::<(&str, Json)>::new())),
        (
            "message",
            Json::from("salt: an empty salt is refused (prefix_empty_salt: refuse)"),
        ),
    ]))
}

#[cfg(test)]
mod tests {
    use super::super::tests::ask;
    use super::*;

    fn run(a: &mut Adapter, lines: &[&str]) -> Vec<Json> {
        lines.iter().map(|line| ask(a, line)).collect()
    }

    #[test]
    fn a_program_by_hand() {
        let mut a = Adapter::new();
        let engine =
            r#""block_size": 2, "model": "m", "kv_dtype": "bf16", "layout": "nhd", "shard": "tp0""#;
        let answers = run(
            &mut a,
            &[
                &format!(r#"{{"seq": 1, "op": "prefix_new", "handle": "e", {engine}}}"#),
                r#"{"seq": 2, "op": "request_new", "handle": "a", "tokens": "1 2 3 4 5", "salt": "t", "user_key": null}"#,
                r#"{"seq": 3, "op": "prefix_store", "prefix": "e", "request": "a"}"#,
                r#"{"seq": 4, "op": "request_new", "handle": "b", "tokens": "1 2 3 4 5 6", "salt": "t"}"#,
                r#"{"seq": 5, "op": "prefix_lookup", "prefix": "e", "request": "b"}"#,
                r#"{"seq": 6, "op": "request_embeds", "request": "b", "start": 2, "length": 1, "content": "v"}"#,
                r#"{"seq": 7, "op": "prefix_lookup", "prefix": "e", "request": "b"}"#,
                r#"{"seq": 8, "op": "tier_new", "handle": "t"}"#,
                r#"{"seq": 9, "op": "prefix_attach", "prefix": "e", "tier": "t"}"#,
                r#"{"seq": 10, "op": "prefix_store", "prefix": "e", "request": "a"}"#,
                &format!(r#"{{"seq": 11, "op": "prefix_new", "handle": "f", {engine}}}"#),
                r#"{"seq": 12, "op": "prefix_attach", "prefix": "f", "tier": "t"}"#,
                r#"{"seq": 13, "op": "request_new", "handle": "c", "tokens": "1 2 3 4", "salt": "t"}"#,
                r#"{"seq": 14, "op": "prefix_lookup", "prefix": "f", "request": "c"}"#,
            ],
        );
        let oks: Vec<Option<&Json>> = answers.iter().map(|r| r.get("ok")).collect();
        assert_eq!(oks[4], Some(&Json::from(4u64)));
        assert_eq!(oks[6], Some(&Json::from(2u64)));
        assert_eq!(oks[13], Some(&Json::from(4u64)));
        assert!(oks.iter().all(Option::is_some), "{answers:?}");
    }

    #[test]
    fn usage_errors_and_the_empty_salt() {
        let mut a = Adapter::new();
        for bad in [
            r#"{"seq": 1, "op": "request_new", "handle": "r", "tokens": "1  2"}"#,
            r#"{"seq": 2, "op": "request_new", "handle": "r", "tokens": "01"}"#,
            r#"{"seq": 3, "op": "request_new", "handle": "r", "tokens": "4294967296"}"#,
            r#"{"seq": 4, "op": "prefix_new", "handle": "e", "block_size": 0, "model": "m", "kv_dtype": "f", "layout": "l", "shard": "s"}"#,
            r#"{"seq": 5, "op": "prefix_lookup", "prefix": "nothing", "request": "r"}"#,
        ] {
            assert!(ask(&mut a, bad).get("failure").is_some(), "{bad}");
        }
        let empty = r#"{"seq": 6, "op": "request_new", "handle": "r", "tokens": "1", "salt": ""}"#;
        assert_eq!(ask(&mut a, empty).get("ok"), Some(&Json::Null));
        let mut refusing = super::super::tests::adapter("--prefix-empty-salt refuse");
        let r = ask(&mut refusing, empty);
        let kind = r
            .get("error")
            .and_then(|e| e.get("kind"))
            .and_then(Json::as_str);
        assert_eq!(kind, Some("empty_salt"));
    }
}
