//! `check` explains every table a select reads: how the select reaches it, whether
//! a commit to it wakes the queue, whether the claim's plan scans it and which
//! column wants an index, and that a JOIN in a claim locks the joined rows too.

use crate::support::check::check;
use crate::support::{assert_has, QueueFile, QueueFiles, TestDb};

/// Orders, their customers (joined) and their items (in a `NOT EXISTS`), 500 items
/// and no index on `order_items.order_id`.
async fn shop(db: &TestDb) {
    db.exec(
        "CREATE TABLE customer (id INT PRIMARY KEY, blocked INT NOT NULL DEFAULT 0);
         CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT NOT NULL, \
         state VARCHAR(10) NOT NULL DEFAULT 'open', KEY (state, id));
         CREATE TABLE order_items (id INT PRIMARY KEY, order_id INT NOT NULL, \
         state VARCHAR(10) NOT NULL DEFAULT 'new');
         INSERT INTO customer (id) SELECT seq FROM seq_1_to_10;
         INSERT INTO orders (id, customer_id) SELECT seq, 1 + seq % 10 FROM seq_1_to_100;
         INSERT INTO order_items (id, order_id, state) \
         SELECT seq, 1 + seq % 100, IF(seq % 7 = 0, 'new', 'done') FROM seq_1_to_500;
         ANALYZE TABLE customer, orders, order_items",
    )
    .await;
}

/// A select reading three tables: check names all three, how each is read, that
/// each wakes the queue, the one the plan scans with the column to index, and that
/// the JOIN locks the customer's row with each claimed order.
#[tokio::test]
async fn check_names_every_table_a_select_reads_and_the_one_that_scans() {
    let db = TestDb::new().await;
    shop(&db).await;
    let files = QueueFiles::new();
    QueueFile::new("complete")
        .select(
            "SELECT o.id FROM orders o JOIN customer c ON c.id = o.customer_id \
             WHERE o.state = 'open' AND c.blocked = 0 \
             AND NOT EXISTS (SELECT 1 FROM order_items i WHERE i.order_id = o.id \
             AND i.state <> 'done') ORDER BY o.id",
        )
        .action_sql("DO :id")
        .on_success("UPDATE orders SET state = 'done' WHERE id = :id")
        .on_failure("UPDATE orders SET state = 'failed' WHERE id = :id")
        .write(&files);
    let ran = check(&[], &[&files.path()], Some(&db.url)).await;
    eprintln!("{}", ran.stdout);
    let wakes = match ran.stdout.contains("wake-ups: complete on the binary log") {
        true => "wakes the queue",
        false => "would wake the queue on the binary log (it polls)",
    };
    assert_has(
        &ran.stdout,
        &format!("reads: queue complete: table orders: read by the select (FROM), {wakes}\n"),
    );
    assert_has(
        &ran.stdout,
        &format!(
            "reads: queue complete: table customer: read by the select (JOIN), {wakes}, locked \
             with each claimed row (the claim's FOR UPDATE locks the rows it joins too, so \
             claims that join one row of customer take turns and the application's writes to \
             it wait): test it in an `EXISTS (SELECT …)` subquery instead\n"
        ),
    );
    assert_has(
        &ran.stdout,
        &format!(
            "reads: queue complete: table order_items: read by the select (NOT EXISTS \
             subquery), {wakes}, scanned (no index on order_id, state): add INDEX (order_id, \
             state) to order_items\n"
        ),
    );
    assert_eq!(ran.stdout.matches("scanned").count(), 1, "{}", ran.stdout);
    // The claim's own warning names the table, not its alias.
    assert_has(
        &ran.stdout,
        "the claim is not driven by an index on table order_items: ",
    );
}
