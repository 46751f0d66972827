//! Verifying a stored block (spec/verify.md, VERIFY; profile v2 as in the
//! contract "Profile v2 verify").
//!
//! Checks in a fixed order, the first failure reported (VERIFY-9,
//! VERIFY-10): marked, readable, (v2) a valid recorded layout, coherent
//! (including, under v2, one whole block), honest, compatible.

use crate::errors::KvError;
use crate::signature::{measure, Profile, Signature, StoredLayer};

/// Decide whether a block may be used; on success, the measured signature.
///
/// A reader of several versions measures each block under the rules of the
/// version its stamp records (SIG-12, PROF-12): a v1 block under v1 rules,
/// a v2 block under v2 rules and its recorded layout. The caller picks the
/// expectation for the block's version; one of the other version is simply
/// `incompatible` on `format_version`.
pub fn verify(
    profile: &Profile,
    recorded: Option<&Signature>,
    layers: &[StoredLayer],
    expected: &Signature,
) -> Result<Signature, KvError> {
    // 1. Marked (VERIFY-2): no stamp is never agreement, whatever the payload.
    let stamp = recorded.ok_or(KvError::Unmarked)?;

    // 2. Readable (VERIFY-3): membership in an explicit list, never a
    //    comparison, and before anything else about the stamp is looked at.
    if !profile.reads.contains(&stamp.format_version) {
        return Err(KvError::UnsupportedFormat {
            found: stamp.format_version,
            readable: profile.reads.clone(),
        });
    }

    // 2b and 3. Measured under the recorded version's rules, with the stamp's
    //    model (SIG-3) and, for v2, its layout, never the expectation's
    //    (PROF-6). v2 measuring checks the layout first (`bad_layout`, step
    //    2b) and ends with the whole-block check (`block_size_mismatch`).
    let measured = measure(profile.recorded_rules(stamp), &stamp.model, layers)?;

    // 4. Honest (VERIFY-4, PROF-10): the stamp against the measurement. The
    //    layout is carried from the stamp, so it never differs here.
    if let Some((field, recorded, actual)) = stamp.first_difference(&measured) {
        return Err(KvError::PayloadMismatch {
            field,
            recorded,
            actual,
        });
    }

    // 5. Compatible (VERIFY-5, PROF-10): the expectation against the
    //    measurement; windows compare exactly.
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
    use crate::signature::tests::{block, flat4, layer};
    use crate::signature::{stamp as stamp_with, Layout, Revision};

    fn sig() -> Signature {
        Signature {
            format_version: 1,
            model: "model-a".into(),
            n_layers: 3,
            n_kv_heads: 2,
            head_dim: 8,
            dtype: "f32".into(),
            tokens: 4,
            layout: None,
        }
    }

    fn sig2(block_size: u64, sliding_window: Option<u64>) -> Signature {
        Signature {
            format_version: 2,
            layout: Some(Layout {
                block_size,
                sliding_window,
            }),
            ..sig()
        }
    }

    fn reader(reads: &[u64], revision: Revision) -> Profile {
        Profile {
            writes: *reads.last().unwrap(),
            reads: reads.to_vec(),
            revision,
        }
    }

    const V1: fn() -> Profile = Profile::v1;

    #[test]
    fn precedence_examples() {
        let v1 = V1();
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
            verify(&v1, Some(&stamp), &block(), &want),
            Err(KvError::PayloadMismatch {
                field: Field::HeadDim,
                recorded: Val::Int(16),
                actual: Val::Int(8)
            })
        );
        // Unmarked and empty: unmarked.
        assert_eq!(verify(&v1, None, &[], &sig()), Err(KvError::Unmarked));
        // Unreadable version over a broken payload: the version.
        let mut broken = block();
        broken[1].seq_len = 7;
        let v99 = Signature {
            format_version: 99,
            ..sig()
        };
        assert_eq!(
            verify(&v1, Some(&v99), &broken, &sig()),
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
            verify(&v1, Some(&v0), &block(), &sig()),
            Err(KvError::UnsupportedFormat { .. })
        ));
        // Overstated depth, although the stamp is what the reader wants.
        let deep = Signature { tokens: 8, ..sig() };
        assert_eq!(
            verify(&v1, Some(&deep), &block(), &deep),
            Err(KvError::PayloadMismatch {
                field: Field::Tokens,
                recorded: Val::Int(8),
                actual: Val::Int(4)
            })
        );
        // Honest block from another configuration.
        assert_eq!(
            verify(
                &v1,
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
                &v1,
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
            verify(&v1, Some(&f16), &block(), &f16),
            Err(KvError::PayloadMismatch {
                field: Field::Dtype,
                ..
            })
        ));
        // Incoherent payload under a readable stamp.
        let mut ragged = block();
        ragged[2] = layer(2, 8, 4, 64, 60);
        assert!(matches!(
            verify(&v1, Some(&sig()), &ragged, &sig()),
            Err(KvError::RaggedPayload {
                layer: 2,
                field: Field::VLength,
                ..
            })
        ));
        // All agree.
        assert_eq!(verify(&v1, Some(&sig()), &block(), &sig()), Ok(sig()));
    }

    #[test]
    fn a_v1_only_reader_refuses_a_v2_stamp_by_version_first() {
        // Even with a bad layout and a broken payload: the version decides.
        let mut broken = block();
        broken[0].seq_len = 9;
        assert_eq!(
            verify(&V1(), Some(&sig2(0, Some(0))), &broken, &sig()),
            Err(KvError::UnsupportedFormat {
                found: 2,
                readable: vec![1]
            })
        );
    }

    #[test]
    fn a_v1_block_read_by_a_v2_reader_is_unreadable() {
        for revision in [Revision::SplitWidth, Revision::LayoutOnly] {
            assert_eq!(
                verify(
                    &reader(&[2], revision),
                    Some(&sig()),
                    &block(),
                    &sig2(4, None)
                ),
                Err(KvError::UnsupportedFormat {
                    found: 1,
                    readable: vec![2]
                })
            );
        }
    }

    #[test]
    fn a_rolling_reader_measures_each_block_by_its_own_version() {
        for revision in [Revision::SplitWidth, Revision::LayoutOnly] {
            let both = reader(&[1, 2], revision);
            // A v1 block: v1 rules, so no whole-block check and no layout.
            let v1_block: Vec<_> = (0..3).map(|_| layer(2, 8, 3, 48, 48)).collect();
            let v1_stamp = Signature { tokens: 3, ..sig() };
            assert_eq!(
                verify(&both, Some(&v1_stamp), &v1_block, &v1_stamp),
                Ok(v1_stamp.clone())
            );
            // ... its claim is `seq_len`, whatever the revision.
            let mut b = block();
            b[1].seq_len = 7;
            assert!(matches!(
                verify(&both, Some(&sig()), &b, &sig()),
                Err(KvError::RaggedPayload {
                    field: Field::SeqLen,
                    ..
                })
            ));
            // ... and a v2 expectation does not fit it.
            assert_eq!(
                verify(&both, Some(&sig()), &block(), &sig2(4, None)),
                Err(KvError::Incompatible {
                    field: Field::FormatVersion,
                    expected: Val::Int(2),
                    found: Val::Int(1)
                })
            );
            // A v2 block: v2 rules under its recorded layout.
            assert_eq!(
                verify(&both, Some(&sig2(4, Some(8))), &block(), &sig2(4, Some(8))),
                Ok(sig2(4, Some(8)))
            );
            assert_eq!(
                verify(&both, Some(&sig2(4, None)), &block(), &sig()),
                Err(KvError::Incompatible {
                    field: Field::FormatVersion,
                    expected: Val::Int(1),
                    found: Val::Int(2)
                })
            );
            assert_eq!(
                verify(&both, Some(&sig2(8, None)), &block(), &sig2(8, None)),
                Err(KvError::BlockSizeMismatch {
                    block_size: 8,
                    tokens: 4
                })
            );
        }
    }

    #[test]
    fn v2_verification_in_order() {
        let v2 = reader(&[2], Revision::SplitWidth);
        // 2b: a recorded layout that is not one, before the empty payload.
        assert_eq!(
            verify(&v2, Some(&sig2(48, Some(128))), &[], &sig2(4, None)),
            Err(KvError::BadLayout {
                field: Field::SlidingWindow,
                block_size: 48,
                sliding_window: Some(128),
                remainder: Some(32)
            })
        );
        // 3: a stamp claiming a block size the payload lacks, although the
        //    expectation agrees with it: a block size mismatch, no lie.
        assert_eq!(
            verify(&v2, Some(&sig2(8, None)), &block(), &sig2(8, None)),
            Err(KvError::BlockSizeMismatch {
                block_size: 8,
                tokens: 4
            })
        );
        // 4: a stamp overstating its heads.
        let lying = Signature {
            n_kv_heads: 4,
            ..sig2(4, None)
        };
        assert!(matches!(
            verify(&v2, Some(&lying), &block(), &lying),
            Err(KvError::PayloadMismatch {
                field: Field::NKvHeads,
                ..
            })
        ));
        // 5: another window, another block size (tokens equal), no window.
        assert_eq!(
            verify(
                &v2,
                Some(&sig2(4, Some(128))),
                &block(),
                &sig2(4, Some(256))
            ),
            Err(KvError::Incompatible {
                field: Field::SlidingWindow,
                expected: Val::Window(Some(256)),
                found: Val::Window(Some(128))
            })
        );
        assert_eq!(
            verify(&v2, Some(&sig2(4, Some(128))), &block(), &sig2(4, None)),
            Err(KvError::Incompatible {
                field: Field::SlidingWindow,
                expected: Val::Window(None),
                found: Val::Window(Some(128))
            })
        );
        let cut_at_2 = Signature {
            tokens: 4,
            ..sig2(2, None)
        };
        assert_eq!(
            verify(&v2, Some(&sig2(4, None)), &block(), &cut_at_2),
            Err(KvError::Incompatible {
                field: Field::BlockSize,
                expected: Val::Int(2),
                found: Val::Int(4)
            })
        );
        // A stamped block round-trips.
        let stamped = stamp_with(flat4(), "model-a", &block()).unwrap();
        assert_eq!(
            verify(&v2, Some(&stamped), &block(), &stamped),
            Ok(stamped.clone())
        );
        // Split widths under the recorded layout, by revision.
        let mut split = block();
        split[2] = layer(2, 8, 4, 64, 48);
        split[2].v_head_dim = Some(6);
        assert!(matches!(
            verify(&v2, Some(&stamped), &split, &stamped),
            Err(KvError::SplitKvHeadWidth { layer: 2, .. })
        ));
        let layout_only = reader(&[2], Revision::LayoutOnly);
        assert!(matches!(
            verify(&layout_only, Some(&stamped), &split, &stamped),
            Err(KvError::RaggedPayload {
                layer: 2,
                field: Field::VLength,
                ..
            })
        ));
    }
}
