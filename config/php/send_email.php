<?php
// A FastCGI job for config/email-fastcgi.toml: PHP-FPM runs it once per email,
// warm (opcache, the pool's own children), with the row as the JSON body of a POST.
// No framework needed. The answer's Status decides, as for a web request:
//
//   2xx          sent: [on_success] runs, with the body as :output
//   429 or 503   the mail server is overloaded: the queue slows down (its circuit
//                breaker), the row is tried again; Retry-After reaches :retry_after
//   anything     this email failed: [on_failure] runs, with the body as :error
//   else
//
// A fatal error or an uncaught exception is this email's failure too, with PHP's
// message as :error, whatever the pool's display_errors. exit(1) and die() are not
// failures under FastCGI (no server sees an exit status): answer a status, or throw.
// The Tableq-Done header, sent last, is what the queue's done_header waits for.
//
// Replace mail_it() with your own mailer (PHPMailer, Symfony Mailer, an API client).

$email = json_decode(file_get_contents('php://input'), true);
// The row: {"id": …, "recipient": …, "subject": …, "body": …, "attempts": …}
// $_SERVER['TABLEQ_QUEUE'] and $_SERVER['TABLEQ_KEY'] say which queue and row.
if (!is_array($email)) {
    http_response_code(400);
    exit('the request body is not a row as JSON');
}

function mail_it(array $email): ?string
{
    // A stand-in for a real mailer: mail to invalid.example is refused.
    if (str_ends_with($email['recipient'], '@invalid.example')) {
        return "550 mailbox unavailable: {$email['recipient']}";
    }
    return null;
}

$refused = mail_it($email);
if ($refused !== null) {
    http_response_code(422);
    exit($refused);
}
header('Tableq-Done: 1');
printf('queued %s for %s', $_SERVER['TABLEQ_KEY'], $email['recipient']);
