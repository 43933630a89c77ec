//! The account a session is logged in as, as the server names it —
//! `CURRENT_USER()`, the user and host of the grant row that let it in — written
//! as a GRANT takes it: `'tableq'@'%'`. Advice that names only the user
//! (`TO tableq`) names the account `'tableq'@'%'`, which is not the one that logged
//! in when its host is `localhost` or `10.0.0.%`: the server refuses that GRANT
//! (ERROR 1133, or 1410 on MySQL).

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::DbError;

/// The account `conn` is logged in as, quoted for a GRANT (`'tableq'@'%'`).
pub async fn current(conn: &mut Conn) -> Result<String, DbError> {
    let name: Option<String> = conn.query_first("SELECT CURRENT_USER()").await?;
    Ok(quoted(&name.unwrap_or_default()))
}

/// `tableq@%` (as `CURRENT_USER()` says it) → `'tableq'@'%'`. The host is after
/// the last `@`: a user name may hold one, a host cannot.
pub fn quoted(current_user: &str) -> String {
    let (user, host) = current_user.rsplit_once('@').unwrap_or((current_user, "%"));
    format!("{}@{}", literal(user), literal(host))
}

/// `it's` → `'it''s'`.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_is_quoted_as_a_grant_takes_it() {
        assert_eq!(quoted("tableq@%"), "'tableq'@'%'");
        assert_eq!(quoted("app@localhost"), "'app'@'localhost'");
        assert_eq!(
            quoted("ops@example.com@10.0.0.%"),
            "'ops@example.com'@'10.0.0.%'"
        );
        assert_eq!(quoted("o'brien@%"), "'o''brien'@'%'");
        assert_eq!(quoted("root"), "'root'@'%'");
    }
}
