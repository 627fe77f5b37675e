-- The queue's stored settings: {capacity, mode, key_ttl}, each nil when the queue
-- has none yet (the prelude read them, and checked every key's type).
return {agreed[1], agreed[2], agreed[3]}
