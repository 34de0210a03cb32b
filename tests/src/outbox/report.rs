//! The comparison table: one row per strategy, over its sessions.

use std::fmt::Write as _;

use super::session::Score;

/// A Markdown table of `rows` (name, one score per session): recall in the first and the
/// last session, recall by 10 s in session 2 (the first warm one; the last if there is only
/// one), and the last session's connections, kilobytes, first event and 95% mark.
#[must_use]
pub fn table(rows: &[(String, Vec<Score>)]) -> String {
    let mut out = String::new();
    out.push_str(
        "| algorithm | recall s1 | recall last | recall@10s s2 | peak conns | total conns \
         | KB | first event ms | p95 ms |\n",
    );
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (name, scores) in rows {
        let (Some(first), Some(last)) = (scores.first(), scores.last()) else {
            let _ = writeln!(out, "| {name} | – | – | – | – | – | – | – | – |");
            continue;
        };
        let warm = scores.get(1).unwrap_or(last);
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} | {} | {:.0} | {} | {} |",
            percent(first.recall),
            percent(last.recall),
            percent(warm.recall_at_10s),
            last.peak_connections,
            last.total_connections,
            last.bytes as f64 / 1000.0,
            ms(last.first_event_ms),
            ms(last.p95_ms),
        );
    }
    out
}

fn percent(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn ms(x: Option<u64>) -> String {
    x.map_or_else(|| "–".to_string(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn score(recall: f64, early: f64, peak: usize) -> Score {
        Score {
            recall,
            recall_at_10s: early,
            peak_connections: peak,
            total_connections: peak + 1,
            bytes: 12_345,
            first_event_ms: Some(120),
            p95_ms: None,
            authors_covered: 3,
            events_reachable: 10,
            over_budget: 0,
        }
    }

    #[test]
    fn one_row_per_strategy_with_first_last_and_warm_numbers() {
        let rows = vec![
            (
                "a".to_string(),
                vec![score(0.5, 0.4, 3), score(0.6, 0.55, 4), score(0.7, 0.6, 5)],
            ),
            ("b".to_string(), vec![score(0.25, 0.125, 2)]),
            ("c".to_string(), Vec::new()),
        ];
        let expected = "\
| algorithm | recall s1 | recall last | recall@10s s2 | peak conns | total conns | KB | first event ms | p95 ms |
|---|---:|---:|---:|---:|---:|---:|---:|---:|
| a | 50.0% | 70.0% | 55.0% | 5 | 6 | 12 | 120 | – |
| b | 25.0% | 25.0% | 12.5% | 2 | 3 | 12 | 120 | – |
| c | – | – | – | – | – | – | – | – |
";
        assert_eq!(table(&rows), expected);
    }
}
