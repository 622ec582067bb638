//! Charts as SVG text (plotters' SVG backend), for the HTML report.
