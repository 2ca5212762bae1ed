"""The dashboard in a real headless browser (Debian's chromium driven by selenium through the
system chromedriver) against a real overlay: peer rows, the zone drawing, and the live
notifications of a subscription typed in the page. The screenshot is kept for people to look
at (docs/dashboard.png is one)."""

from __future__ import annotations

import shutil
import struct
import uuid
from pathlib import Path

import pytest
import trio

pytestmark = pytest.mark.processes

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
needs_browser = pytest.mark.skipif(not (CHROMIUM and DRIVER),
                                   reason="needs Debian's chromium and chromium-driver (apt-get install chromium "
                                          "chromium-driver; .ci/run installs them)")


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,1100"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)


def wait_for(driver, condition, timeout: float = 30.0):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.2).until(condition)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


@needs_browser
async def test_dashboard_shows_peers_zones_and_live_notifications(gateway, cluster, tmp_path):
    from selenium.webdriver.common.by import By

    tag = uuid.uuid4().hex[:8]
    async with gateway.client() as http:  # some data, so zones have quads to colour
        body = "".join(f'<http://dash.example/s{i}> <http://purl.oclc.org/NET/sao/hasValue> "{i}" '
                       f'<http://dash.example/{tag}/{i}> .\n' for i in range(40))
        assert (await http.post("/events", content=body, headers={"content-type": "application/n-quads"})).status_code == 200
    shot = tmp_path / "dashboard.png"

    def in_browser(publish_one) -> dict:
        driver = browser()
        try:
            driver.get(f"{gateway.url}/#token={gateway.token}")
            wait_for(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#peers tbody tr")) == 3)
            rows = driver.find_elements(By.CSS_SELECTOR, "#peers tbody tr")
            seen = {"rows": [r.find_elements(By.TAG_NAME, "td")[1].text for r in rows],
                    "zones": len(driver.find_elements(By.CSS_SELECTOR, "#zones rect.zone")),
                    "quads": driver.find_element(By.ID, "total-quads").text,
                    "state": driver.find_element(By.ID, "overlay-state").text}
            fills = {r.get_attribute("fill") for r in driver.find_elements(By.CSS_SELECTOR, "#zones rect.zone")}
            seen["fills"] = fills
            # every peer's zone is a rectangle of its own (zones split along the axes not drawn were
            # drawn on top of each other: 3 zones for 4 peers)
            def rects() -> set:
                return {tuple(r.get_attribute(a) for a in ("x", "y", "width", "height"))
                        for r in driver.find_elements(By.CSS_SELECTOR, "#zones rect.zone")}
            seen["rects"] = rects()
            # drawn along predicate x object, which no zone of 3 peers is split on: side by side
            from selenium.webdriver.support.ui import Select
            Select(driver.find_element(By.ID, "axis-x")).select_by_value("2")
            Select(driver.find_element(By.ID, "axis-y")).select_by_value("3")
            seen["stacked"] = rects()
            sparql = driver.find_element(By.ID, "sparql")
            sparql.clear()
            sparql.send_keys("SELECT ?s ?v WHERE { GRAPH ?g { ?s <http://purl.oclc.org/NET/sao/hasValue> ?v } "
                             "FILTER(?v = \"live\") }")
            driver.find_element(By.ID, "subscribe").click()
            wait_for(driver, lambda d: "active" in d.find_element(By.ID, "live-state").text)
            publish_one()
            wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#notifications li"))
            seen["notification"] = driver.find_element(By.CSS_SELECTOR, "#notifications li").text
            wait_for(driver, lambda d: d.find_element(By.ID, "total-rate").text not in ("–", ""))
            driver.save_screenshot(str(shot))
            return seen
        finally:
            driver.quit()

    token = trio.lowlevel.current_trio_token()

    def publish_one() -> None:
        async def go() -> None:
            async with gateway.client() as http:
                reply = await http.post("/events", content=f'<http://dash.example/live> '
                                        f'<http://purl.oclc.org/NET/sao/hasValue> "live" <http://dash.example/{tag}/live> .',
                                        headers={"content-type": "application/n-quads"})
                assert reply.status_code == 200

        trio.from_thread.run(go, trio_token=token)

    seen = await trio.to_thread.run_sync(in_browser, publish_one)
    assert sorted(seen["rows"]) == sorted(cluster.addresses)
    assert seen["zones"] == 3 and len(seen["rects"]) == 3 and len(seen["stacked"]) == 3 and len(seen["fills"]) >= 2  # coloured by load: not all alike
    assert int(seen["quads"].replace(",", "")) >= 40
    assert "partition the space: yes" in seen["state"]
    assert f"http://dash.example/{tag}/live" in seen["notification"] and "?v=live" in seen["notification"]
    width, height = png_size(shot)
    assert (width, height) >= (1000, 800)
    keep = Path(__file__).resolve().parents[2] / "docs" / "dashboard.png"
    if not keep.exists():  # the picture in the docs is made by this test
        shutil.copy(shot, keep)
