//! kvconform-rust-adapter: an independent Rust implementation of the kvconform
//! specification, served over the JSON-lines stdio protocol.
//!
//! Requests arrive one JSON object per line on stdin; each gets exactly one
//! response line on stdout, in order, flushed at once (the harness may
//! pipeline a whole program before reading). Logs go to stderr only.
//!
//! The command-line flags choose the declaration (`config.rs`); a bad flag
//! is one line on stderr and exit status 2, before any request is read.

mod config;
mod errors;
mod hasher;
mod identity;
mod json;
mod kv_cache;
mod plan;
mod protocol;
mod signature;
#[cfg(test)]
mod vectors;
mod verify;

use std::io::{self, BufRead, Write};
use std::panic::{self, AssertUnwindSafe};

use config::Invocation;
use json::{Json, Surrogates};
use protocol::{envelope, Adapter, Next, Reply, NAME, VERSION};

fn main() {
    let config = match config::parse_args(std::env::args().skip(1)) {
        Ok(Invocation::Serve(config)) => config,
        Ok(Invocation::Help) => {
            println!("{}", config::USAGE);
            return;
        }
        Err(message) => {
            eprintln!("{NAME}: {message}");
            std::process::exit(2);
        }
    };

    // A panic is logged by the default hook (to stderr) and then answered as
    // a failure below; it never takes the process down silently.
    let default_hook = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        eprintln!("{NAME}: panic while handling a request (answered as a failure)");
        default_hook(info);
    }));

    eprintln!(
        "{NAME} {VERSION}: ready (writes {}, reads {:?}, profile_v2_revision {}, \
         plan_key_window {})",
        config.profile.writes,
        config.profile.reads,
        config.profile.revision.name(),
        config.window_keying.name()
    );
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let stdout = io::stdout();
    let mut output = stdout.lock();
    let mut adapter = Adapter::with_config(config);
    let mut line = Vec::new();

    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) => break, // end of input: the harness went away
            Ok(_) => {}
            Err(e) => {
                eprintln!("{NAME}: cannot read stdin: {e}");
                std::process::exit(1);
            }
        }
        let (response, next) = answer(&mut adapter, &line);
        let Some(response) = response else { continue };
        let mut text = response.to_line();
        text.push('\n');
        if let Err(e) = output
            .write_all(text.as_bytes())
            .and_then(|_| output.flush())
        {
            eprintln!("{NAME}: cannot write stdout: {e}");
            std::process::exit(1);
        }
        if next == Next::Exit {
            break;
        }
    }
    eprintln!("{NAME}: exiting");
}

/// The response to one input line; `None` for a blank line, which is not a
/// request and gets no answer (answering it would shift every later one).
fn answer(adapter: &mut Adapter, raw: &[u8]) -> (Option<Json>, Next) {
    let text = match std::str::from_utf8(raw) {
        Ok(t) => t,
        Err(e) => {
            let lossy = String::from_utf8_lossy(raw);
            let reply = Reply::Failure(format!("request is not valid UTF-8: {e}"));
            return (Some(envelope(salvage_seq(&lossy), reply)), Next::Continue);
        }
    };
    if text.trim().is_empty() {
        eprintln!("{NAME}: ignoring a blank line");
        return (None, Next::Continue);
    }
    let request = match json::parse(text) {
        Ok(r @ Json::Obj(_)) => r,
        Ok(other) => {
            let reply = Reply::Failure(format!(
                "a request is a JSON object, got {}",
                other.type_name()
            ));
            return (Some(envelope(Json::Null, reply)), Next::Continue);
        }
        Err(e) => {
            let reply = Reply::Failure(format!("malformed request: {e}"));
            return (Some(envelope(salvage_seq(text), reply)), Next::Continue);
        }
    };
    let seq = request.get("seq").cloned().unwrap_or(Json::Null);
    if !matches!(seq, Json::Int(n) if n >= 0) {
        // Without a usable seq the refusal cannot name its request: seq null.
        let reply = Reply::Failure(format!(
            "seq: expected a non-negative integer, got {}",
            seq.to_line()
        ));
        return (Some(envelope(Json::Null, reply)), Next::Continue);
    }
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| adapter.handle(&request)));
    let (reply, next) = match outcome {
        Ok(answered) => answered,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string());
            (
                Reply::Failure(format!("{NAME} panicked: {what}")),
                Next::Continue,
            )
        }
    };
    (Some(envelope(seq, reply)), next)
}

/// The `seq` of a request that could not be read, so its refusal still lines
/// up with it: first by reading it again with unpaired surrogates replaced
/// (the usual reason a well-formed line is refused), then by a plain scan.
fn salvage_seq(text: &str) -> Json {
    if let Ok(v) = json::parse_with(text, Surrogates::Replace) {
        if let Some(Json::Int(n)) = v.get("seq") {
            return if *n >= 0 { Json::Int(*n) } else { Json::Null };
        }
    }
    let Some(at) = text.find("\"seq\"") else {
        return Json::Null;
    };
    let rest = text[at + 5..].trim_start();
    let Some(rest) = rest.strip_prefix(':') else {
        return Json::Null;
    };
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse::<i128>().map(Json::Int).unwrap_or(Json::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn respond(line: &str) -> Json {
        let mut a = Adapter::new();
        answer(&mut a, line.as_bytes()).0.unwrap()
    }

    #[test]
    fn malformed_requests_are_failures_with_their_seq() {
        let r =
            respond(r#"{"seq": 4, "op": "hash", "program": [{"op": "str", "value": "\ud800"}]}"#);
        assert_eq!(r.get("seq"), Some(&Json::Int(4)));
        assert!(r
            .get("failure")
            .and_then(Json::as_str)
            .unwrap()
            .contains("surrogate"));
        let r = respond(r#"{"seq": 5, "op": "hash", "program": [}"#);
        assert_eq!(r.get("seq"), Some(&Json::Int(5)));
        assert!(r.get("failure").is_some());
        let r = respond("[1, 2]");
        assert_eq!(r.get("seq"), Some(&Json::Null));
        let r = respond(r#"{"op": "reset"}"#);
        assert!(r.get("failure").is_some());
        let r = respond(r#"{"seq": "7", "op": "reset"}"#);
        assert_eq!(r.get("seq"), Some(&Json::Null));
        assert!(r.get("failure").is_some());
        let mut a = Adapter::new();
        assert!(answer(&mut a, b"   \n").0.is_none());
        let r = answer(&mut a, b"{\"seq\": 6, \"op\": \"x\xff\"}\n")
            .0
            .unwrap();
        assert_eq!(r.get("seq"), Some(&Json::Int(6)));
    }

    #[test]
    fn shutdown_answers_then_exits() {
        let mut a = Adapter::new();
        let (r, next) = answer(&mut a, br#"{"seq": 9, "op": "shutdown"}"#);
        assert_eq!(r.unwrap().get("ok"), Some(&Json::Null));
        assert_eq!(next, Next::Exit);
    }
}
