//! Reading `EXPLAIN FORMAT=JSON` of a claim (MySQL's and MariaDB's `query_block`
//! shapes both), and the verdict on whether the claim is driven by an index: pure
//! functions over the plan and the rows one real claim read, so the rules have unit
//! tests. A plan of another shape (MySQL ≥ 8.3 with `explain_json_format_version =
//! 2`) is not read at all: the verdict then rests on what the claim read.

use serde_json::Value;

/// How the plan reads one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanTable {
    /// As EXPLAIN names it (the alias, if the select gives one).
    pub name: String,
    /// `ALL`, `index`, `range`, `ref`, …
    pub access: String,
    /// The index it uses, if any.
    pub key: Option<String>,
}

impl PlanTable {
    /// Access type `index`: the whole index read in order.
    fn walks_an_index(&self) -> bool {
        self.access.eq_ignore_ascii_case("index")
    }
}

/// What the plan says, as far as the claim's cost goes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub tables: Vec<PlanTable>,
    /// The rows are sorted after reading them: every match is read before the first
    /// is returned.
    pub filesort: bool,
}

impl Plan {
    /// The plan, or `None` when `json` is not a plan of the `query_block` shape.
    pub fn from_json(json: &str) -> Option<Plan> {
        let value: Value = serde_json::from_str(json).ok()?;
        value.get("query_block")?;
        let mut plan = Plan::default();
        walk(&value, &mut plan);
        Some(plan)
    }

    /// The first table read whole (a scan or an index walked end to end).
    pub fn walked(&self) -> Option<&PlanTable> {
        self.tables
            .iter()
            .find(|t| t.access.eq_ignore_ascii_case("ALL") || t.walks_an_index())
    }

    /// The table the claim reads first: the one an index would help.
    pub fn driving(&self) -> Option<&PlanTable> {
        self.walked().or(self.tables.first())
    }
}

fn walk(value: &Value, plan: &mut Plan) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                match (key.as_str(), inner) {
                    ("table", Value::Object(table)) => {
                        let name = table.get("table_name").and_then(Value::as_str);
                        let access = table.get("access_type").and_then(Value::as_str);
                        if let (Some(name), Some(access)) = (name, access) {
                            if !name.starts_with('<') {
                                plan.tables.push(PlanTable {
                                    name: name.to_string(),
                                    access: access.to_string(),
                                    key: table
                                        .get("key")
                                        .and_then(Value::as_str)
                                        .map(str::to_string),
                                });
                            }
                        }
                    }
                    ("filesort", _) | ("read_sorted_file", _) => plan.filesort = true,
                    ("using_filesort", Value::Bool(true)) => plan.filesort = true,
                    _ => {}
                }
                walk(inner, plan);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| walk(item, plan)),
        _ => {}
    }
}

/// Rows one claim may read before it counts as not driven by an index.
pub fn reasonable_reads(batch: usize) -> u64 {
    10 * batch as u64 + 10
}

/// Why the claim is not driven by an index, in words, or `None` if it is. `reads`
/// is what one real claim read (Handler_read_*); `table_rows`, roughly how many
/// rows the table holds. On a small table the optimizer rightly scans, so the plan
/// alone counts only once the table is bigger than a claim should read.
pub fn verdict(
    plan: &Plan,
    reads: Option<u64>,
    table_rows: Option<u64>,
    batch: usize,
) -> Option<String> {
    let limit = reasonable_reads(batch);
    let reads_too_many = reads.is_some_and(|r| r > limit);
    let big = reads_too_many || table_rows.is_some_and(|r| r > limit);
    let mut why = Vec::new();
    if let Some(walked) = plan.walked() {
        why.push(match &walked.key {
            Some(key) if walked.walks_an_index() => format!("walks all of index {key}"),
            _ => "scans the whole table".to_string(),
        });
    }
    if plan.filesort {
        why.push("sorts every matching row (filesort)".to_string());
    }
    if !big || (why.is_empty() && !reads_too_many) {
        return None;
    }
    let plan_says = format!("EXPLAIN: it {}", why.join(" and "));
    Some(match reads {
        Some(reads) if reads_too_many && why.is_empty() => {
            format!("one claim read {reads} rows to lock at most {batch}")
        }
        Some(reads) if reads_too_many => {
            format!("one claim read {reads} rows to lock at most {batch}; {plan_says}")
        }
        Some(reads) => format!(
            "{plan_says} (one claim read {reads} rows to lock at most {batch} today; that grows \
             with every row it passes before the waiting ones)"
        ),
        None => plan_says,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARIADB_PRIMARY_WALK: &str = r#"{"query_block": {"select_id": 1, "nested_loop": [
        {"table": {"table_name": "email", "access_type": "index", "possible_keys": ["status"],
         "key": "PRIMARY", "rows": 40}}]}}"#;
    const MARIADB_FILESORT: &str = r#"{"query_block": {"select_id": 1, "nested_loop": [
        {"read_sorted_file": {"filesort": {"sort_key": "email.`id`", "table": {
         "table_name": "email", "access_type": "range", "key": "status", "rows": 5000}}}}]}}"#;
    const MYSQL_SCAN: &str = r#"{"query_block": {"select_id": 1, "ordering_operation": {
        "using_filesort": true, "table": {"table_name": "job", "access_type": "ALL",
        "rows_examined_per_scan": 100000}}}}"#;
    const MYSQL_REF: &str = r#"{"query_block": {"select_id": 1, "ordering_operation": {
        "using_filesort": false, "table": {"table_name": "job", "access_type": "ref",
        "key": "state_id"}}}}"#;

    #[test]
    fn reads_both_servers_plans() {
        let walk = Plan::from_json(MARIADB_PRIMARY_WALK).unwrap();
        assert_eq!(walk.walked().unwrap().key.as_deref(), Some("PRIMARY"));
        assert!(!walk.filesort);
        let sort = Plan::from_json(MARIADB_FILESORT).unwrap();
        assert!(sort.filesort && sort.walked().is_none());
        assert_eq!(sort.driving().unwrap().name, "email");
        let scan = Plan::from_json(MYSQL_SCAN).unwrap();
        assert!(scan.filesort);
        assert_eq!(scan.walked().unwrap().access, "ALL");
        let good = Plan::from_json(MYSQL_REF).unwrap();
        assert!(!good.filesort && good.walked().is_none());
        assert_eq!(Plan::from_json("not json"), None);
    }

    #[test]
    fn reads_access_types_in_any_case_and_no_other_shape() {
        let upper = MARIADB_PRIMARY_WALK.replace("\"index\"", "\"INDEX\"");
        let walk = Plan::from_json(&upper).unwrap();
        assert_eq!(walk.walked().unwrap().key.as_deref(), Some("PRIMARY"));
        assert!(verdict(&walk, Some(3), Some(50_000), 1)
            .unwrap()
            .contains("walks all of index PRIMARY"));
        // MySQL ≥ 8.3, explain_json_format_version = 2: not this shape, so no plan;
        // the verdict rests on the rows the claim read.
        const MYSQL_V2: &str = r#"{"query": "/* select#1 */ select …", "inputs": [
            {"operation": "Index scan on job using PRIMARY", "access_type": "index",
             "index_access_type": "index_scan", "table_name": "job", "index_name": "PRIMARY"}],
            "operation": "Limit: 1 row(s)", "access_type": "limit"}"#;
        let unknown = Plan::from_json(MYSQL_V2);
        assert_eq!(unknown, None);
        let plan = unknown.unwrap_or_default();
        assert_eq!(verdict(&plan, Some(2), Some(50_000), 1), None);
        assert_eq!(
            verdict(&plan, Some(5000), Some(50_000), 1).as_deref(),
            Some("one claim read 5000 rows to lock at most 1")
        );
    }

    #[test]
    fn judges_by_what_a_claim_really_reads() {
        let walk = Plan::from_json(MARIADB_PRIMARY_WALK).unwrap();
        let good = Plan::from_json(MYSQL_REF).unwrap();
        // A small table: scanning it is right.
        assert_eq!(verdict(&walk, Some(12), Some(12), 1), None);
        // A big table walked in key order, even when this claim was lucky.
        assert_eq!(
            verdict(&walk, Some(3), Some(50_000), 1).as_deref(),
            Some("EXPLAIN: it walks all of index PRIMARY (one claim read 3 rows to lock at most 1 today; that grows with every row it passes before the waiting ones)")
        );
        // The optimizer's plan looked fine, but the claim read 5000 rows.
        assert_eq!(
            verdict(&good, Some(5000), None, 10).as_deref(),
            Some("one claim read 5000 rows to lock at most 10")
        );
        assert_eq!(verdict(&good, Some(100), Some(1_000_000), 10), None);
        let scan = Plan::from_json(MYSQL_SCAN).unwrap();
        assert_eq!(
            verdict(&scan, Some(100_000), Some(100_000), 1).as_deref(),
            Some("one claim read 100000 rows to lock at most 1; EXPLAIN: it scans the whole table and sorts every matching row (filesort)")
        );
    }
}
