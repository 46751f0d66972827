//! The records whose SHA-256 digests name blocks: tagged fields, integers
//! as big-endian u64s, strings and byte strings as their length and bytes
//! (PREFIX-16). An optional value is a 0 byte when absent and a 1 byte and
//! the value when present, so an empty salt is not no salt (PREFIX-14).

use super::BlockId;
use crate::sha256;

/// The tag in front of each field of a record.
pub mod tag {
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
/// scheme's (a later version of the records changes the text).
pub const SCHEME: &str = "kvconform-rust-adapter prefix chain, record version 1";

/// A record being written.
#[derive(Default)]
pub struct Record(Vec<u8>);

impl Record {
    pub fn tag(&mut self, tag: u8) -> &mut Record {
        self.0.push(tag);
        self
    }

    pub fn u64(&mut self, value: u64) -> &mut Record {
        self.0.extend_from_slice(&value.to_be_bytes());
        self
    }

    pub fn text(&mut self, value: &str) -> &mut Record {
        self.bytes(value.as_bytes())
    }

    pub fn bytes(&mut self, value: &[u8]) -> &mut Record {
        self.u64(value.len() as u64);
        self.0.extend_from_slice(value);
        self
    }

    /// 0 when absent; 1 and then the string when present, empty or not.
    pub fn optional_text(&mut self, value: Option<&str>) -> &mut Record {
        self.presence(value.is_some());
        if let Some(text) = value {
            self.text(text);
        }
        self
    }

    pub fn presence(&mut self, present: bool) -> &mut Record {
        self.0.push(u8::from(present));
        self
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    pub fn digest(&self) -> BlockId {
        sha256::digest(&self.0)
    }
}

/// The digest of a label standing for bytes the suite does not send
/// (weights, media content, embeddings): equal labels, equal bytes.
pub fn label_digest(label: &str) -> BlockId {
    let mut record = Record::default();
    record.tag(tag::LABEL).text(label);
    record.digest()
}
