//! What `check` finds of a FastCGI action: that the server accepts a connection
//! and answers FCGI_GET_VALUES (a management record: no script runs), and, when
//! the server is on this host, that the script is a file here and what the pool
//! does with PHP's errors (`settings`). Nothing is sent to the script.

use std::path::Path;

use futures::future::BoxFuture;

use super::record::get_values;
use super::{pool, settings, Fastcgi};
use crate::action::deadline;
use crate::action::{Probe, Probed};
use crate::db::Item;

impl Probe for Fastcgi {
    fn probe<'a>(&'a self, _queue: &'a str, _sample: Option<&'a Item>) -> BoxFuture<'a, Vec<Probed>> {
        Box::pin(async move {
            let timeout = self.config.common.timeout;
            let mut answered = false;
            let address = async {
                let (found, answers) = address(self).await;
                answered = answers;
                found
            };
            let mut found = deadline::probe(timeout, address, busy(self)).await;
            // Its own limit: a pool slow to say its settings keeps the note above.
            if answered {
                found.extend(settings::look(&self.config, &self.server).await);
            }
            found.extend(script(self));
            found
        })
    }
}

/// The server took the connection, but no child answered (within the look's
/// limit, which [`deadline::probe`] adds).
fn busy(fastcgi: &Fastcgi) -> Probed {
    Probed::warning(
        "address",
        format!(
            "PHP-FPM at {}: every child busy (pm.max_children)? It took the connection but \
             no child answered",
            fastcgi.server
        ),
    )
}

/// What the server said at its address, and whether it answered.
async fn address(fastcgi: &Fastcgi) -> (Vec<Probed>, bool) {
    let server = &fastcgi.server;
    match answers(fastcgi).await {
        Ok(values) => {
            let note = format!("the FastCGI server at {server} answers ({values})");
            (vec![Probed::note("address", note)], true)
        }
        Err(why) => (vec![Probed::error("address", why)], false),
    }
}

/// The server's answer to GET_VALUES, as `FCGI_MAX_CONNS=…`; `Err` says why none.
async fn answers(fastcgi: &Fastcgi) -> Result<String, String> {
    let server = &fastcgi.server;
    let mut conn = pool::connect(&fastcgi.config.address)
        .await
        .map_err(|e| super::judge::cannot_connect(&e, server).error.unwrap_or_default())?;
    let values = get_values(&mut conn)
        .await
        .map_err(|e| format!("{server} does not answer as a FastCGI server: {e}"))?;
    let said: Vec<String> = values.iter().map(|(n, v)| format!("{n}={v}")).collect();
    Ok(said.join(", "))
}

/// Whether the script is a file here, when the server is on this host.
fn script(fastcgi: &Fastcgi) -> Option<Probed> {
    let script = &fastcgi.config.script;
    if !fastcgi.config.address.is_local() {
        return None;
    }
    match Path::new(script).is_file() {
        true => None,
        false => Some(Probed::warning(
            "script",
            format!(
                "the script {script} is not a file on this host, where PHP-FPM at {} is \
                 (unless PHP-FPM runs in a container or chroot of its own, every row would \
                 fail with `Primary script unknown`)",
                fastcgi.server
            ),
        )),
    }
}
