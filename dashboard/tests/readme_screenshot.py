"""Makes docs/dashboard.png: a minute of made-up traffic on a few queues,
then the queue list in headless Chromium at 1200 px. Not a test (pytest
does not collect it). Run it as the tests run:

    scripts/with-servers -- target/dashboard/venv/bin/python dashboard/tests/readme_screenshot.py [OUT.png]
"""

import base64
import math
import random
import sys
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).parent))
from conftest import ROOT, Dashboard, redis_url  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402

SECONDS = 50
QUEUES = {
    # name: (adds per second at the peak, share that fails, share delayed)
    "orders.timeout": (40, 0.00, 0.9),
    "webhooks": (60, 0.06, 0.0),
    "emails.welcome": (25, 0.01, 0.2),
    "thumbnails": (15, 0.00, 0.0),
    "reports.nightly": (8, 0.10, 0.5),
}


def main():
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "dashboard.png"
    r = redis.Redis.from_url(redis_url())
    r.flushall()
    r.execute_command("DQ.CONFIG", "webhooks", "SET", "MAXATTEMPTS", 3, "BACKOFF", "fixed:200ms")
    d = Dashboard(["--redis", redis_url(), "--sample-interval", "1s", "--history", "1m"])
    rng = random.Random(7)
    n = 0
    opts = Options()
    opts.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--hide-scrollbars",
                "--window-size=1200,1400", "--force-device-scale-factor=1"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    try:
        start = time.monotonic()
        while time.monotonic() - start < SECONDS:
            t = time.monotonic() - start
            for q, (peak, fail, delayed) in QUEUES.items():
                rate = peak * (0.55 + 0.45 * math.sin(t / 9 + len(q)))
                for _ in range(max(1, int(rate / 5))):
                    n += 1
                    payload = '{"id":%d,"customer":"c-%d","amount":%d}' % (n, rng.randint(1, 999), rng.randint(5, 500))
                    if rng.random() < delayed:
                        r.execute_command("DQ.ADD", q, payload, "DELAY", rng.randint(1000, 60_000))
                    else:
                        r.execute_command("DQ.ADD", q, payload)
                # Consumers keep up with most of it; some work fails.
                take = int(rate / 5 * (0.8 if q != "thumbnails" else 0.5)) + 1
                popped = r.execute_command("DQ.POP", q, "COUNT", take, "LEASE", 30_000) or []
                for id_, _payload, attempt in popped:
                    if rng.random() < fail:
                        err = rng.choice([
                            "HTTP 503 from https://hooks.example.com/orders",
                            "timeout after 10s",
                            "HTTP 410 Gone",
                        ])
                        if err == "HTTP 410 Gone":
                            r.execute_command("DQ.NACK", q, id_, "DEAD", "ATTEMPT", attempt, "ERROR", err)
                        else:
                            r.execute_command("DQ.NACK", q, id_, "ATTEMPT", attempt, "ERROR", err)
                    elif rng.random() < 0.97:
                        r.execute_command("DQ.ACK", q, id_)
            time.sleep(0.2)
        # The traffic has run until now: the last samples are not idle.
        driver.get(d.url("/"))
        height = driver.execute_script(
            "return document.querySelector('section.servers').getBoundingClientRect().top")
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png",
            "clip": {"x": 0, "y": 0, "width": 1200, "height": int(height) - 4, "scale": 1},
            "captureBeyondViewport": True,
        })
        out.write_bytes(base64.b64decode(shot["data"]))
    finally:
        driver.quit()
        d.stop()
        d.log_path.unlink(missing_ok=True)
    print(out)


if __name__ == "__main__":
    main()
