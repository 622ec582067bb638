//! Unit tests of compare: matching, verdicts and rendering, on hand-made reports.
