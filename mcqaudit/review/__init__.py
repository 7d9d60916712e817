"""Review rules that need no study: what a decision is recorded as (:mod:`mcqaudit.review.rules`)."""
