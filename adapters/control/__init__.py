"""The controller <-> broker control channel: framing (pure), request bodies (pure) and the asyncio transport."""
