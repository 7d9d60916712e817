"""mcqaudit: grade and audit multiple-choice LLM evaluations whose answer letter is read out of free text."""

__version__ = "0.1.0"
