//! Verifying a stored block (spec/verify.md, VERIFY).
//!
//! Five checks, in a fixed order, the first failure reported (VERIFY-9):
//! marked, readable, coherent, honest, compatible.

use crate::errors::KvError;
use crate::signature::{measure_as, Profile, Signature, StoredLayer};

/// Decide whether a block may be used; on success, the measured signature.
pub fn verify(
    profile: &Profile,
    recorded: Option<&Signature>,
    layers: &[StoredLayer],
    expected: &Signature,
) -> Result<Signature, KvError> {
    // 1. Marked (VERIFY-2): no stamp is never agreement, whatever the payload.
    let stamp = recorded.ok_or(KvError::Unmarked)?;

    // 2. Readable (VERIFY-3): membership in an explicit list, never a comparison.
    if !profile.reads.contains(&stamp.format_version) {
        return Err(KvError::UnsupportedFormat {
            found: stamp.format_version,
            readable: profile.reads.to_vec(),
        });
    }

    // 3. Coherent, measured under the stamp's own version (SIG-12), with the
    //    stamp's model, the one field no payload can show (SIG-3).
    let measured = measure_as(stamp.format_version, &stamp.model, layers)?;

    // 4. Honest (VERIFY-4): the stamp against the measurement.
    if let Some((field, recorded, actual)) = stamp.first_difference(&measured) {
        return Err(KvError::PayloadMismatch {
            field,
            recorded,
            actual,
        });
    }

    // 5. Compatible (VERIFY-5): the expectation against the measurement.
    if let Some((field, expected, found)) = expected.first_difference(&measured) {
        return Err(KvError::Incompatible {
            field,
            expected,
            found,
        });
    }

    Ok(measured)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::{Field, Val};
    use crate::signature::tests::{block, layer};
    use crate::signature::V1;

    fn sig() -> Signature {
        Signature {
            format_version: 1,
            model: "model-a".into(),
            n_layers: 3,
            n_kv_heads: 2,
            head_dim: 8,
            dtype: "f32".into(),
            tokens: 4,
        }
    }

    #[test]
    fn precedence_examples() {
        // A lying stamp and a wrong expectation at once: the lie wins.
        let stamp = Signature {
            head_dim: 16,
            ..sig()
        };
        let want = Signature {
            model: "model-b".into(),
            head_dim: 16,
            ..sig()
        };
        assert_eq!(
            verify(&V1, Some(&stamp), &block(), &want),
            Err(KvError::PayloadMismatch {
                field: Field::HeadDim,
                recorded: Val::Int(16),
                actual: Val::Int(8)
            })
        );
        // Unmarked and empty: unmarked.
        assert_eq!(verify(&V1, None, &[], &sig()), Err(KvError::Unmarked));
        // Unreadable version over a broken payload: the version.
        let mut broken = block();
        broken[1].seq_len = 7;
        let v99 = Signature {
            format_version: 99,
            ..sig()
        };
        assert_eq!(
            verify(&V1, Some(&v99), &broken, &sig()),
            Err(KvError::UnsupportedFormat {
                found: 99,
                readable: vec![1]
            })
        );
        let v0 = Signature {
            format_version: 0,
            ..sig()
        };
        assert!(matches!(
            verify(&V1, Some(&v0), &block(), &sig()),
            Err(KvError::UnsupportedFormat { .. })
        ));
        // Overstated depth, although the stamp is what the reader wants.
        let deep = Signature { tokens: 8, ..sig() };
        assert_eq!(
            verify(&V1, Some(&deep), &block(), &deep),
            Err(KvError::PayloadMismatch {
                field: Field::Tokens,
                recorded: Val::Int(8),
                actual: Val::Int(4)
            })
        );
        // Honest block from another configuration.
        assert_eq!(
            verify(
                &V1,
                Some(&sig()),
                &block(),
                &Signature {
                    n_kv_heads: 4,
                    ..sig()
                }
            ),
            Err(KvError::Incompatible {
                field: Field::NKvHeads,
                expected: Val::Int(4),
                found: Val::Int(2)
            })
        );
        // Another model is incompatible, not a mismatch.
        assert_eq!(
            verify(
                &V1,
                Some(&sig()),
                &block(),
                &Signature {
                    model: "model-b".into(),
                    ..sig()
                }
            ),
            Err(KvError::Incompatible {
                field: Field::Model,
                expected: Val::Text("model-b".into()),
                found: Val::Text("model-a".into())
            })
        );
        // A stamp naming f16 over an f32 payload.
        let f16 = Signature {
            dtype: "f16".into(),
            ..sig()
        };
        assert!(matches!(
            verify(&V1, Some(&f16), &block(), &f16),
            Err(KvError::PayloadMismatch {
                field: Field::Dtype,
                ..
            })
        ));
        // Incoherent payload under a readable stamp.
        let mut ragged = block();
        ragged[2] = layer(2, 8, 4, 64, 60);
        assert!(matches!(
            verify(&V1, Some(&sig()), &ragged, &sig()),
            Err(KvError::RaggedPayload {
                layer: 2,
                field: Field::VLength,
                ..
            })
        ));
        // All agree.
        assert_eq!(verify(&V1, Some(&sig()), &block(), &sig()), Ok(sig()));
    }
}
