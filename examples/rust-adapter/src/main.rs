//! kvconform-rust-adapter: an independent Rust implementation of the kvconform
//! specification, served over the JSON-lines stdio protocol.
//!
//! Requests arrive one JSON object per line on stdin; each gets exactly one
//! response line on stdout, in order. Responses are flushed whenever the
//! adapter is about to wait for input (PROTO-4), so the answers to a
//! pipelined program go out in one write; a long batch is flushed at least
//! every `FLUSH_INTERVAL` as well. Logs go to stderr only.
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
mod prefix;
mod protocol;
mod sha256;
mod signature;
#[cfg(test)]
mod vectors;
mod verify;

use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

use config::Invocation;
use json::{Json, Surrogates};
use protocol::{envelope, Adapter, Next, Reply, NAME, VERSION};

/// The longest a written response waits in the output buffer while a batch
/// of pipelined requests is worked through.
const FLUSH_INTERVAL: Duration = Duration::from_millis(50);

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
         plan_key_window {}, prefix options {:?})",
        config.profile.writes,
        config.profile.reads,
        config.profile.revision.name(),
        config.window_keying.name(),
        config.prefix.declared()
    );
    let mut input = BufReader::with_capacity(1 << 16, io::stdin().lock());
    let mut output = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let mut adapter = Adapter::with_config(config);
    let mut line = Vec::new();
    let mut last_flush = Instant::now();

    loop {
        line.clear();
        // Every response owed is out before the adapter waits for input
        // (PROTO-4): the read below waits unless a whole line is buffered.
        if !input.buffer().contains(&b'\n') || last_flush.elapsed() > FLUSH_INTERVAL {
            flush_or_exit(&mut output);
            last_flush = Instant::now();
        }
        match input.read_until(b'\n', &mut line) {
            Ok(0) => break, // end of input: the harness went away
            Ok(_) => {}
            Err(e) => {
                flush_or_exit(&mut output);
                eprintln!("{NAME}: cannot read stdin: {e}");
                std::process::exit(1);
            }
        }
        let (response, next) = answer(&mut adapter, &line);
        let Some(response) = response else { continue };
        let mut text = response.to_line();
        text.push('\n');
        if let Err(e) = output.write_all(text.as_bytes()) {
            eprintln!("{NAME}: cannot write stdout: {e}");
            std::process::exit(1);
        }
        if next == Next::Exit {
            break;
        }
    }
    flush_or_exit(&mut output);
    eprintln!("{NAME}: exiting");
}

/// Writes out every buffered response, or ends the process if stdout is gone.
fn flush_or_exit(output: &mut impl Write) {
    if let Err(e) = output.flush() {
        eprintln!("{NAME}: cannot write stdout: {e}");
        std::process::exit(1);
    }
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
