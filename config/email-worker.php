<?php
// A tableq worker in plain PHP, for config/email-worker.toml: started once and
// kept, it reads one email per line on stdin (the row as JSON) and answers one
// line per email on stdout: {"ok": true} or {"ok": false, "error": "…"}. Its
// stdin ends when tableq wants it to stop. The protocol:
// docs/src/reference/worker-protocol.md.

// stdout is for answers only: PHP's warnings, and any logging, go to stderr
// (tableq's log, under the queue's name).
ini_set('display_errors', 'stderr');

// Bootstrap once, not once per email: autoloader, configuration, an SMTP client.
// require __DIR__ . '/vendor/autoload.php';

while (($line = fgets(STDIN)) !== false) {
    $email = json_decode($line, true); // {"id": …, "recipient": …, "subject": …, "body": …, "attempts": …}
    try {
        // Send it here. This stand-in refuses invalid.example, as a mail server would.
        if (str_ends_with($email['recipient'], '@invalid.example')) {
            throw new RuntimeException("550 mailbox unavailable: {$email['recipient']}");
        }
        $answer = ['ok' => true, 'output' => "queued {$email['id']} for {$email['recipient']}"];
    } catch (Throwable $e) {
        // A failure with "retry_after" (say, the SMTP server is down) would be
        // trouble downstream, for the circuit breaker, rather than this email's.
        $answer = ['ok' => false, 'error' => $e->getMessage()];
    }
    echo json_encode($answer), "\n";
}
