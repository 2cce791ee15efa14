"""Vector indexes and SearchVectors (DynamoDB's vector search, 2026).

entries.py: what a vector index holds for an item (engine-neutral; the engines and the API's write checks use it) ·
exact.py: the exact nearest-neighbour search over one search partition's packed vectors (numpy; imported only when
a search first runs) · definitions.py: VectorIndexes of CreateTable and VectorIndexUpdates of UpdateTable, and their
descriptions · search.py: the SearchVectors operation · backfill.py: online creation.
"""
