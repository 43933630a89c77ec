//! Standard Webhooks signatures (https://www.standardwebhooks.com): HMAC-SHA256 over
//! `{webhook-id}.{webhook-timestamp}.{body}`, base64, one `v1,…` per key.

use base64::Engine;
use hmac::{KeyInit, Mac};
use sha2::Sha256;

use super::config::SigningKey;

/// The `webhook-signature` header value for one request.
pub fn signature(keys: &[SigningKey], id: &str, timestamp: u64, body: &[u8]) -> String {
    keys.iter()
        .map(|key| {
            let mut mac = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(&key.0)
                .expect("HMAC accepts keys of any length");
            mac.update(format!("{id}.{timestamp}.").as_bytes());
            mac.update(body);
            let digest = mac.finalize().into_bytes();
            format!(
                "v1,{}",
                base64::engine::general_purpose::STANDARD.encode(digest)
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example from the Standard Webhooks specification's test vectors.
    #[test]
    fn matches_the_specification_example() {
        let key = base64::engine::general_purpose::STANDARD
            .decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            .unwrap();
        let sig = signature(
            &[SigningKey(key)],
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }
}
