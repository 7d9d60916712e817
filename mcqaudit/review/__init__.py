"""Review rules that need no study (docs/design.md §8): what a review records and the one confirm-or-override
rule (:mod:`~mcqaudit.review.rules`), a spot check's allocation (:mod:`~mcqaudit.review.queues`), a review log
read into frozen records (:mod:`~mcqaudit.review.log`), row filters (:mod:`~mcqaudit.review.filters`) and
what an Inspect export is given (:mod:`~mcqaudit.review.corrections`). Pure: no I/O."""
