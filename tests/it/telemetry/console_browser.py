"""Drives the status page and the console in headless Chromium, a step a line.

Usage: console_browser.py BASE TOKEN SCREENSHOT CHROMIUM. Reads one JSON command
a line on stdin ({"op": ...}), does it in one browser page (1280 x 800 until a
"viewport" step), and answers one JSON line on stdout with what the page showed.
The Rust tests (console_browser.rs, console_history_browser.rs) check the database
between the steps.
"""

import json
import sys

from playwright.sync_api import sync_playwright

BASE, TOKEN, SCREENSHOT, CHROMIUM = sys.argv[1:5]

# What scrolls sideways (an element that scrolls within the page).
SIDEWAYS = """[...document.querySelectorAll('body, body *')]
    .filter(e => e.scrollWidth > e.clientWidth + 1
      && ['auto', 'scroll'].includes(getComputedStyle(e).overflowX))
    .map(e => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className)"""

# What scrolls sideways, and where every heading of the queue list is.
LAYOUT = """() => {
  const doc = document.documentElement;
  const sideways = """ + SIDEWAYS + """;
  const headings = [...document.querySelectorAll('#queues thead th')].map(th => {
    const r = th.getBoundingClientRect();
    return {text: th.innerText, left: r.left, right: r.right, bottom: r.bottom};
  });
  return {scroll_width: doc.scrollWidth, client_width: doc.clientWidth,
          inner_width: window.innerWidth, inner_height: window.innerHeight,
          sideways, headings};
}"""

# Whether a page is wider than the window (and which elements reach past it),
# what scrolls sideways, and how small the charts' axis labels are.
FITS = """() => {
  const doc = document.documentElement;
  const sideways = """ + SIDEWAYS + """;
  const wide = [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > window.innerWidth)
    .slice(-5)
    .map(e => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className + ' '
      + Math.round(e.getBoundingClientRect().right));
  const labels = [...document.querySelectorAll('.plot .x span, .plot .y span')]
    .map(e => parseFloat(getComputedStyle(e).fontSize));
  return {scroll_width: doc.scrollWidth, inner_width: window.innerWidth, sideways, wide,
          smallest_label_px: labels.length ? Math.min(...labels) : null};
}"""

# Each chart: its points as the page draws them.
CHARTS = """() => [...document.querySelectorAll('figure.chart')].map(f => ({
  id: f.id,
  points_count: Number(f.dataset.pointsCount),
  lines: [...f.querySelectorAll('polyline')].map(l => ({
    series: l.dataset.series, count: Number(l.dataset.pointsCount)})),
  points: [...f.querySelectorAll('circle')].map(c => ({
    series: c.dataset.series, at: Number(c.dataset.at), value: Number(c.dataset.value)})),
}))"""

ROWS = """() => [...document.querySelectorAll('tr.failed-row')].map(tr => tr.dataset.key)"""

ATTEMPTS = """() => [...document.querySelectorAll('tr.attempt')].map(tr => ({
  attempt: Number(tr.dataset.attempt),
  error: tr.querySelector('[data-field=error]').innerText,
  status: tr.querySelector('[data-field=status]').innerText}))"""


def history_step(page, op, command):
    """The steps of the history test (console_history_browser.rs); None: not one."""
    if op == "viewport":
        page.set_viewport_size({"width": command["width"], "height": command["height"]})
        return {}
    if op == "open":
        page.goto(f"{BASE}/{command['path']}")
        return {"url": page.url, "fits": page.evaluate(FITS), "body": page.inner_text("body")}
    if op == "charts":
        page.goto(f"{BASE}/queues/{command['queue']}?since={command['since']}")
        return {"charts": page.evaluate(CHARTS), "fits": page.evaluate(FITS)}
    if op == "search":
        page.fill("#failed-search input[name=q]", command["q"])
        page.click("#failed-search button")
        shown = text_of(page, "[data-field=failed_shown]")
        return {"url": page.url, "keys": page.evaluate(ROWS), "shown": shown}
    if op == "open_attempts":
        page.click(f"tr.failed-row[data-key='{command['key']}'] a[data-field=attempts]")
        return {"url": page.url, "attempts": page.evaluate(ATTEMPTS), "fits": page.evaluate(FITS)}
    if op == "retry_row":
        page.locator("#retry-row").get_by_role("button", name="Retry").click()
        return {"url": page.url, "notice": text_of(page, "[data-field=notice]")}
    if op == "shot":
        page.screenshot(path=command["path"], full_page=True)
        return {}
    return None


def queue_page(page, queue):
    page.goto(f"{BASE}/queues/{queue}")


def text_of(page, selector):
    found = page.query_selector(selector)
    return found.inner_text() if found else None


def step(page, command):
    op = command["op"]
    if op == "layout":
        page.goto(f"{BASE}/")
        answer = page.evaluate(LAYOUT)
        answer["body"] = page.inner_text("body")
        page.screenshot(path=SCREENSHOT)
        return answer
    if op == "sign_in":
        page.goto(f"{BASE}/sign-in")
        page.fill("#sign-in input[name=token]", command.get("token", TOKEN))
        page.click("#sign-in button")
        return {"url": page.url, "body": page.inner_text("body")}
    if op == "page":
        queue_page(page, command["queue"])
        return {"body": page.inner_text("body"), "buttons": page.locator("button").count()}
    if op == "pause":
        queue_page(page, command["queue"])
        page.fill("#pause input[name=reason]", command["reason"])
        page.click("#pause button")
        return {"url": page.url, "notice": text_of(page, "[data-field=notice]")}
    if op == "resume":
        queue_page(page, command["queue"])
        page.click("#resume button")
        return {"url": page.url, "notice": text_of(page, "[data-field=notice]")}
    if op == "retry_group":
        queue_page(page, command["queue"])
        row = page.locator("tr.failure", has_text=command["kind"])
        row.get_by_role("button", name="Retry").click()
        return {"url": page.url, "notice": text_of(page, "[data-field=notice]")}
    if op == "discard_key":
        queue_page(page, command["queue"])
        page.fill("#retry-key input[name=key]", command["key"])
        page.locator("#retry-key").get_by_role("button", name="Discard").click()
        return {"url": page.url, "notice": text_of(page, "[data-field=notice]")}
    if op == "discard_all":
        queue_page(page, command["queue"])
        page.locator("#retry-all").get_by_role("button", name="Discard").click()
        return {"url": page.url, "body": page.inner_text("body")}
    if op == "confirm":
        page.click("#confirm button")
        return {"url": page.url, "notice": text_of(page, "[data-field=notice]")}
    if op == "screenshot":
        queue_page(page, command["queue"])
        page.screenshot(path=command["path"], full_page=True)
        return {}
    if op == "post_without_csrf":
        # The signed-in browser's cookie goes along; the form's token does not.
        response = page.request.post(
            f"{BASE}/queues/{command['queue']}/pause", form={"reason": "forged"}
        )
        return {"status": response.status, "body": response.text()}
    answer = history_step(page, op, command)
    if answer is not None:
        return answer
    raise ValueError(f"no op {op}")


def main():
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        for line in sys.stdin:
            try:
                answer = step(page, json.loads(line))
            except Exception as error:  # the test prints it and fails
                answer = {"error": repr(error)}
            print(json.dumps(answer), flush=True)
        browser.close()


main()
