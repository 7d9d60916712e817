"""The LLM judge: prompt templates and reply parsing (pure), the async client, and the stand-in server."""
