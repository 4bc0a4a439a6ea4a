"""What passkey and the RULER-style tasks share: greedy generation in batches (`generation`) and the same items
scored by likelihood against distractors (`likelihood`, `adapters`)."""
