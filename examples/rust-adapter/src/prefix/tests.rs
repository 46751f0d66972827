//! The prefix cache by hand: each test is one rule and its both halves.

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
    c.store(&req("1 2 3 4 5 6 7 8 9 10", None, None)).unwrap();
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
        c.store(&req("1 2 3 4", Some("ab"), Some("c"))).unwrap();
        assert_eq!(c.lookup(&req("1 2 3 4", Some("ab"), Some("c"))), 4);
        assert_eq!(c.lookup(&req("1 2 3 4", Some("a"), Some("bc"))), 0);
        assert_eq!(c.lookup(&req("1 2 3 4", Some("c"), Some("ab"))), 0);
        c.store(&req("1 2 3 4", None, None)).unwrap();
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
        c.store(&a).unwrap();
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
    c.store(&a).unwrap();
    let mut b = req("7 7 7 7 1 2 3 4", None, None);
    b.spans.push(Span::media((0, 4), "pixels", (100, 30), None));
    assert_eq!(c.lookup(&b), 0);
    b.spans[0] = Span::media((0, 4), "pixels", (30, 100), None);
    assert_eq!(c.lookup(&b), 8);
}

#[test]
fn under_tokens_a_block_is_reused_as_far_as_it_was_computed_alike() {
    let mut c = cache(Options {
        partial: Partial::Tokens,
        ..Options::default()
    });
    c.store(&req("1 2 3 4 5 6", None, None)).unwrap();
    // the stored tail: its two positions, never the two it did not have
    assert_eq!(c.lookup(&req("1 2 3 4 5 6 0 0", None, None)), 6);
    assert_eq!(c.lookup(&req("1 2 3 4 5 9", None, None)), 5);
    assert_eq!(c.lookup(&req("1 2 0 4", None, None)), 2);
    // an image from position 2 on: the two positions before it are still alike
    let mut imaged = req("1 2 3 4", None, None);
    imaged
        .spans
        .push(Span::media((2, 2), "pixels", (8, 8), None));
    assert_eq!(c.lookup(&imaged), 2);
    let mut whole = cache(Options::default());
    whole.store(&req("1 2 3 4 5 6", None, None)).unwrap();
    assert_eq!(whole.lookup(&req("1 2 3 4 5 6 0 0", None, None)), 4);
}

#[test]
fn a_tier_with_storage_outlives_its_process() {
    let dir = std::env::temp_dir().join(format!("kvconform-tier-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.to_str().unwrap();
    let request = req("1 2 3 4 5 6 7 8", Some("s"), None);
    {
        let mut writer = cache(Options::default());
        writer.attach(Rc::new(RefCell::new(SharedTier::open(Some(path)).unwrap())));
        writer.store(&request).unwrap();
    }
    // A new process: nothing in memory, the same directory.
    let mut reader = cache(Options::default());
    reader.attach(Rc::new(RefCell::new(SharedTier::open(Some(path)).unwrap())));
    assert_eq!(reader.lookup(&request), 8);
    assert_eq!(reader.lookup(&req("1 2 3 4 5 6 7 8", Some("t"), None)), 0);
    // Without storage, a tier is this process's alone.
    let mut alone = cache(Options::default());
    alone.attach(Rc::new(RefCell::new(SharedTier::open(None).unwrap())));
    assert_eq!(alone.lookup(&request), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bounded_cache_keeps_the_most_recent_stores_and_no_stale_entry() {
    let mut c = cache(Options::default());
    c.bound(3).unwrap();
    c.store(&req("1 2 3 4 5 6 7 8", None, None)).unwrap();
    // reuses the first block, which now counts as stored by this store; the
    // last block has the tokens of the first request's second block
    c.store(&req("1 2 3 4 9 10 11 12 5 6 7 8", None, None))
        .unwrap();
    assert_eq!(c.lookup(&req("1 2 3 4 5 6 7 8", None, None)), 4);
    assert_eq!(c.lookup(&req("1 2 3 4 9 10 11 12 5 6 7 8", None, None)), 12);
    assert!(c.bound(0).is_err());
    let mut tokens = cache(Options {
        partial: Partial::Tokens,
        ..Options::default()
    });
    assert!(tokens.bound(3).is_err());
}
