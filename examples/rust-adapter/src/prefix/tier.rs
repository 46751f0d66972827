//! A shared tier (PREFIX-21, PREFIX-22): the block ids written for every
//! prefix cache attached to it. When the harness gives the tier a storage
//! directory (`tier_new`'s `storage`, PROTO-36), every id is also kept
//! there, one empty file named by the id in hex, so that a later process
//! opening the same directory finds every block written before: the tier
//! outlives the process, as a disk or remote tier does.

use std::collections::HashSet;
use std::fs;
use std::path::PathBuf;

use super::BlockId;

#[derive(Default)]
pub struct SharedTier {
    ids: HashSet<BlockId>,
    storage: Option<PathBuf>,
}

impl SharedTier {
    /// A tier held in this process only (`storage` absent), or the one kept
    /// in `storage`, with every id already written there.
    pub fn open(storage: Option<&str>) -> Result<SharedTier, String> {
        let mut tier = SharedTier {
            ids: HashSet::new(),
            storage: storage.map(PathBuf::from),
        };
        if let Some(dir) = &tier.storage {
            let shown = dir.display();
            fs::create_dir_all(dir).map_err(|e| format!("storage: cannot make {shown}: {e}"))?;
            let entries =
                fs::read_dir(dir).map_err(|e| format!("storage: cannot read {shown}: {e}"))?;
            for entry in entries {
                let entry = entry.map_err(|e| format!("storage: cannot read {shown}: {e}"))?;
                if let Some(id) = entry.file_name().to_str().and_then(from_hex) {
                    tier.ids.insert(id);
                }
            }
        }
        Ok(tier)
    }

    pub fn contains(&self, id: &BlockId) -> bool {
        self.ids.contains(id)
    }

    /// Write `ids` to the tier (and to its storage, the first time each is seen).
    pub fn write(&mut self, ids: impl IntoIterator<Item = BlockId>) -> Result<(), String> {
        for id in ids {
            if self.ids.insert(id) {
                if let Some(dir) = &self.storage {
                    let path = dir.join(to_hex(&id));
                    fs::write(&path, b"")
                        .map_err(|e| format!("storage: cannot write {}: {e}", path.display()))?;
                }
            }
        }
        Ok(())
    }
}

fn to_hex(id: &BlockId) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(name: &str) -> Option<BlockId> {
    if name.len() != 64 || !name.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let mut id = [0u8; 32];
    for (i, byte) in id.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&name[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(id)
}
