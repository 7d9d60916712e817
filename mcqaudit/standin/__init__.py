"""The stand-in judge: a fake OpenAI-compatible server for tests, the demo and ``mcqaudit standin-judge``.

It is NOT an LLM and not part of the judge (:mod:`mcqaudit.judge`): :mod:`~mcqaudit.standin.server` serves
``/v1/chat/completions`` (and a Batch API) on 127.0.0.1, :mod:`~mcqaudit.standin.heuristic` reads the
rendered prompt and answers with a documented heuristic (docs/standin.md).
"""
