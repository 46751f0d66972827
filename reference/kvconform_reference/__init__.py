"""The reference implementation of the kvconform specification (``spec/``).

One module per concept, in the order the specification presents them:

- :mod:`.hasher` -- the FNV-1a 64 key hasher and its canonical encoding (HASH).
- :mod:`.identity` -- never-recycled model-instance and KV-allocation ids (ID).
- :mod:`.kv_cache` -- a KV cache whose storage carries an allocation id (ALLOC).
- :mod:`.model` -- a model: family, structural parameters, hooks, instance id.
- :mod:`.plan` -- a held decode plan and its validity predicate (PLAN).
- :mod:`.signature` -- block signatures measured from the payload (SIG, PROF).
- :mod:`.verify` -- verification of stored blocks (VERIFY).
- :mod:`.errors` -- the closed set of typed errors (ERR).

It is written to be checked against the specification paragraph by
paragraph, not to be fast.
"""
