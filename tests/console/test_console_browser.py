"""The web console end to end, in a real headless Chromium against a real `openddb serve` process: the page signs
its calls in the browser and every action lands as an ordinary API call (checked back through boto3). Screenshots
of each step are kept under the test's temporary directory."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ServerProcess, make_client, unique_name
from tests.console.browser import chromium, require_browser

WAIT_SECONDS = 20


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    require_browser()
    yield from chromium(tmp_path / "profile")



class Page:
    """The console in the browser: waits for what a user would wait for, and keeps screenshots."""

    def __init__(self, driver: Any, shots: Path) -> None:
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait
        self.driver = driver
        # (the page re-renders a list when it changes: an element found a moment ago may be gone)
        self.wait = WebDriverWait(driver, WAIT_SECONDS, ignored_exceptions=(StaleElementReferenceException,))
        self.shots = shots
        shots.mkdir(exist_ok=True)

    def shot(self, name: str) -> None:
        assert self.driver.save_screenshot(str(self.shots / f"{len(list(self.shots.iterdir())):02d}-{name}.png"))

    def css(self, selector: str) -> Any:
        from selenium.webdriver.common.by import By
        return self.wait.until(lambda d: d.find_element(By.CSS_SELECTOR, selector))

    def text_in(self, selector: str, text: str) -> Any:
        from selenium.webdriver.common.by import By
        def found(driver: Any) -> Any:
            for element in driver.find_elements(By.CSS_SELECTOR, selector):
                if text in element.text:
                    return element
            return False
        return self.wait.until(found, f"no {selector} containing {text!r}")

    def heading(self, text: str) -> None:
        self.text_in("h1", text)

    def click(self, selector: str, text: str) -> None:
        # Found and clicked in one try, tried again if the page re-rendered in between.
        self.wait.until(lambda d: self.text_in(selector, text).click() or True)

    def fill(self, name: str, value: str, within: str = "main") -> None:
        def typed(driver: Any) -> bool:  # (again from the start if the page re-rendered meanwhile)
            element = self.css(f'{within} [name="{name}"]')
            element.clear()
            element.send_keys(value)
            return True
        self.wait.until(typed)

    def assert_labelled(self) -> None:
        """Every form control of the page has a label (or an accessible name)."""
        unlabelled = self.driver.execute_script(
            "return [...document.querySelectorAll('main input, main select, main textarea')]"
            ".filter((e) => !e.labels.length && !e.getAttribute('aria-label')).map((e) => e.outerHTML)")
        assert unlabelled == []

    def choose(self, name: str, value: str) -> None:
        from selenium.webdriver.support.select import Select
        Select(self.css(f'main [name="{name}"]')).select_by_value(value)


def test_console_scenario(browser: Any, console_server: ServerProcess, tmp_path: Path) -> None:
    """Create a table, add and edit items, run a query and a PartiQL statement, and see the stream's records."""
    page = Page(browser, tmp_path / "screenshots")
    ddb: Any = make_client(console_server.endpoint)
    name = unique_name("console")
    browser.get(console_server.endpoint + "/console")
    page.heading("Tables")
    page.shot("tables")

    page.click("a", "Create table")
    page.heading("Create table")
    page.fill("table-name", name)
    page.fill("hash-name", "pk")
    page.fill("range-name", "sk")
    page.choose("stream", "NEW_AND_OLD_IMAGES")
    page.shot("create-form")
    page.click("main button", "Create table")
    page.heading(f"Table {name}")
    table = ddb.describe_table(TableName=name)["Table"]
    assert [k["AttributeName"] for k in table["KeySchema"]] == ["pk", "sk"]
    assert table["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    page.shot("table")

    _add_and_edit_items(page, ddb, name)
    _query(page, name)
    _partiql(page, ddb, name)
    _stream(page, ddb, name)


def _add_and_edit_items(page: Page, ddb: Any, name: str) -> None:
    page.click("nav a", "Items")
    page.heading(f"Items of {name}")
    page.click("main button", "New item")
    page.fill("item", json.dumps({"pk": {"S": "user1"}, "sk": {"S": "order#1"}, "total": {"N": "12.50"}}))
    page.click("main button", "Save item")
    page.text_in("#status", "Item saved (1 write capacity unit)")
    page.text_in("table.items td", '"order#1"')
    # Plain JSON, converted to DynamoDB JSON by the page.
    page.click("main button", "New item")
    page.choose("item-format", "plain")
    page.fill("item", json.dumps({"pk": "user1", "sk": "order#2", "total": 30, "tags": ["a", "b"]}))
    page.click("main button", "Save item")
    page.text_in("table.items td", '"order#2"')
    assert ddb.get_item(TableName=name, Key={"pk": {"S": "user1"}, "sk": {"S": "order#2"}})["Item"] == {
        "pk": {"S": "user1"}, "sk": {"S": "order#2"}, "total": {"N": "30"}, "tags": {"L": [{"S": "a"}, {"S": "b"}]}}
    # Refused before it is sent (not DynamoDB JSON), then by the server (no sort key): nothing written.
    page.click("main button", "New item")
    page.fill("item", '{"pk": {"STRING": "x"}}')
    page.click("main button", "Save item")
    page.text_in("p.problem", 'unknown type "STRING"')
    page.fill("item", '{"pk": {"S": "x"}}')
    page.click("main button", "Save item")
    page.text_in("p.problem", "ValidationException")
    page.shot("item-refused")
    assert ddb.scan(TableName=name)["Count"] == 2
    # Edit the first item: its row's Edit button loads it into the editor.
    page.text_in("table.items tr", '"order#1"').find_element("css selector", "button").click()
    editor = page.css('main [name="item"]')
    assert json.loads(editor.get_attribute("value"))["total"] == {"N": "12.5"}
    page.fill("item", json.dumps({"pk": {"S": "user1"}, "sk": {"S": "order#1"}, "total": {"N": "15"},
                                  "note": {"S": "edited"}}))
    page.click("main button", "Save item")
    page.text_in("table.items td", '"edited"')
    page.shot("items")
    item = ddb.get_item(TableName=name, Key={"pk": {"S": "user1"}, "sk": {"S": "order#1"}})["Item"]
    assert item["note"] == {"S": "edited"} and item["total"] == {"N": "15"}


def _query(page: Page, name: str) -> None:
    page.click("nav a", "Query")
    page.heading(f"Query {name}")
    page.fill("partition", "user1")
    page.choose("sort-operator", "begins_with")
    page.fill("sort", "order#")
    page.choose("direction", "false")
    request = json.loads(page.css('[data-testid="request-json"]').text)
    assert request["KeyConditionExpression"] == "#pk = :pk AND begins_with(#sk, :sk)"
    assert request["ExpressionAttributeValues"] == {":pk": {"S": "user1"}, ":sk": {"S": "order#"}}
    assert request["ScanIndexForward"] is False
    assert "client.query(**{" in page.css('[data-testid="boto3"]').text
    cli = page.css('[data-testid="cli"]').text
    assert cli.startswith("aws dynamodb query --endpoint-url http://127.0.0.1:")
    assert json.loads(cli.split("--cli-input-json ", 1)[1].strip("'")) == request
    page.click("main form button[type=submit]", "Run")
    page.text_in('[data-testid="counts"]', "2 items returned, 2 scanned")
    assert "0.5 units" in page.css('[data-testid="capacity"]').text  # two small items, eventually consistent
    rows = page.css("main div[aria-live] table.items tbody").text
    assert rows.index('"order#2"') < rows.index('"order#1"')  # descending
    page.shot("query")
    # The same builder scans with a filter: no key condition, the user's own names and values only.
    page.choose("operation", "Scan")
    page.fill("filter", "#t > :min")
    page.fill("names", '{"#t": "total"}')
    page.fill("values", '{":min": {"N": "20"}}')
    request = json.loads(page.css('[data-testid="request-json"]').text)
    assert request == {"TableName": name, "FilterExpression": "#t > :min", "ExpressionAttributeNames": {"#t": "total"},
                       "ExpressionAttributeValues": {":min": {"N": "20"}}, "ReturnConsumedCapacity": "TOTAL"}
    assert "client.scan(**{" in page.css('[data-testid="boto3"]').text
    page.click("main form button[type=submit]", "Run")
    page.text_in('[data-testid="counts"]', "1 item returned, 2 scanned")
    page.text_in("table.items td", '"order#2"')
    page.shot("scan")


def _partiql(page: Page, ddb: Any, name: str) -> None:
    page.click("#nav a", "PartiQL")
    page.heading("PartiQL")
    page.fill("statement", f"INSERT INTO \"{name}\" VALUE {{'pk': 'user2', 'sk': 'order#9', 'total': 3}}")
    page.click("main button", "Run statement")
    page.text_in('[data-testid="counts"]', "Done: 0 items returned")
    page.fill("statement", f"SELECT * FROM \"{name}\" WHERE pk = ?")
    page.fill("parameters", '[{"S": "user2"}]')
    page.click("main button", "Run statement")
    page.text_in("table.items td", '"order#9"')
    page.shot("partiql")
    inserted = ddb.get_item(TableName=name, Key={"pk": {"S": "user2"}, "sk": {"S": "order#9"}})["Item"]
    assert inserted["total"] == {"N": "3"}


def _stream(page: Page, ddb: Any, name: str) -> None:
    page.driver.get(f"{page.driver.current_url.split('#')[0]}#/stream/{name}")
    page.heading(f"Stream of {name}")
    page.choose("from", "TRIM_HORIZON")
    page.click("main button", "Start tail")
    page.text_in("li.record", "MODIFY")  # the edit made above
    page.text_in("li.record", '"order#9"')  # the PartiQL insert
    ddb.put_item(TableName=name, Item={"pk": {"S": "live"}, "sk": {"S": "tail"}})
    page.text_in("li.record", '"live"')  # written while the page follows the stream
    page.shot("stream")
    page.click("main button", "Stop tail")


def test_console_under_auth_verify_asks_for_credentials(browser: Any, tmp_path: Path) -> None:
    """With --auth verify the console has no way around the signature check: unsigned it gets the server's refusal
    and asks for a key; a wrong secret is refused; the root's key signs its calls in the page, and the GET of the
    advisor's report (which the server refuses unsigned)."""
    server = ServerProcess(None, "--auth", "verify", "--root-credentials", "AKIACONSOLEROOT:console-secret",
                           "--cors", "https://app.example")  # (the console, same-origin, needs no CORS grant)
    try:
        ddb: Any = make_client(server.endpoint)
        ddb._request_signer._credentials.access_key = "AKIACONSOLEROOT"  # (the root's key, for checking back)
        ddb._request_signer._credentials.secret_key = "console-secret"
        name = unique_name("verified")
        ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                         AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                         KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
        page = Page(browser, tmp_path / "screenshots")
        browser.get(server.endpoint + "/console")
        page.text_in("#sign-in-reason", "UnrecognizedClientException")
        page.heading("Could not load this page")
        page.shot("refused")
        _sign_in(page, "AKIACONSOLEROOT", "wrong")
        page.text_in("#sign-in-reason", "InvalidSignatureException")
        _sign_in(page, "AKIACONSOLEROOT", "console-secret")
        page.heading("Tables")
        page.text_in("main table a", name)
        page.text_in("#identity", "Signed as AKIACONSOLEROOT")
        assert page.css("#sign-out").is_displayed()
        page.shot("signed-in")
        ddb.scan(TableName=name)
        page.driver.get(f"{page.driver.current_url.split('#')[0]}#/advisor")  # (its GET signed in the page too)
        page.heading("Advisor")
        page.text_in('[data-testid="advisor-summary"]', "observed requests")
        page.text_in("table.patterns tbody tr", name)
    finally:
        server.finish()


def _sign_in(page: Page, key: str, secret: str) -> None:
    page.css("#sign-in[open]")
    for field, value in (("accessKeyId", key), ("secretAccessKey", secret)):
        page.fill(field, value, within="#sign-in")
    page.click("#sign-in button", "Use these credentials")


def test_console_manages_a_table(browser: Any, console_server: ServerProcess, tmp_path: Path) -> None:
    """The table page's forms: add a global index and query it, change capacity, enable TTL, disable the stream,
    delete the index and the table; each change checked back through boto3. Every control is labelled."""
    page = Page(browser, tmp_path / "screenshots")
    ddb: Any = make_client(console_server.endpoint)
    name = unique_name("manage")
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"})
    for key, status in (("a", "open"), ("b", "open"), ("c", "closed")):
        ddb.put_item(TableName=name, Item={"pk": {"S": key}, "status": {"S": status}})
    browser.get(f"{console_server.endpoint}/console#/table/{name}")
    page.heading(f"Table {name}")
    page.assert_labelled()
    page.fill("index-name", "byStatus")
    page.fill("hash-name", "status")
    page.click("main button", "Add index")
    page.text_in("main table th", "byStatus")
    _wait_active(ddb, name)

    browser.get(f"{console_server.endpoint}/console#/query/{name}")
    page.heading(f"Query {name}")
    page.assert_labelled()
    page.choose("source", "byStatus")
    page.fill("partition", "open")
    assert json.loads(page.css('[data-testid="request-json"]').text)["IndexName"] == "byStatus"
    page.click("main form button[type=submit]", "Run")
    page.text_in('[data-testid="counts"]', "2 items returned")
    page.shot("index-query")

    _browse_pages(page, ddb, name)
    browser.get(f"{console_server.endpoint}/console#/table/{name}")
    page.heading(f"Table {name}")
    _change_settings(page, ddb, name)
    page.click("main button", "Delete index byStatus")
    page.wait.until(lambda d: d.switch_to.alert).accept()
    page.text_in("main p", "No secondary indexes.")
    assert not ddb.describe_table(TableName=name)["Table"].get("GlobalSecondaryIndexes")
    page.fill("confirm-delete", name)
    page.click("main button", "Delete table")
    page.heading("Tables")
    with pytest.raises(ddb.exceptions.ResourceNotFoundException):
        ddb.describe_table(TableName=name)


def _browse_pages(page: Page, ddb: Any, name: str) -> None:
    """30 items: a first page of 25, then the 5 others, and back."""
    for first in (0, 20):  # (a batch takes 25 at most)
        ddb.batch_write_item(RequestItems={name: [{"PutRequest": {"Item": {"pk": {"S": f"more{n:02d}"}}}}
                                                  for n in range(first, min(first + 20, 27))]})
    page.click("main nav a", "Items")
    page.text_in("main p", "Page 1: 25 items")
    page.click("main button", "Next page")
    page.text_in("main p", "Page 2: 5 items")
    page.wait.until(lambda d: not page.text_in("main button", "Next page").is_enabled())
    page.click("main button", "Previous page")
    page.text_in("main p", "Page 1: 25 items")
    page.shot("browse")


def _wait_active(ddb: Any, name: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        indexes = ddb.describe_table(TableName=name)["Table"].get("GlobalSecondaryIndexes", [])
        if indexes and indexes[0]["IndexStatus"] == "ACTIVE":
            return
        time.sleep(0.1)
    raise AssertionError("the index added through the console never became ACTIVE")


def _change_settings(page: Page, ddb: Any, name: str) -> None:
    page.choose("billing", "PROVISIONED")
    page.fill("rcu", "7")
    page.fill("wcu", "3")
    page.click("main button", "Update capacity")
    page.text_in("dd", "7 read / 3 write units")
    table = ddb.describe_table(TableName=name)["Table"]
    assert table["BillingModeSummary"]["BillingMode"] == "PROVISIONED"
    assert table["GlobalSecondaryIndexes"][0]["ProvisionedThroughput"]["ReadCapacityUnits"] == 7
    page.fill("ttl-attribute", "expires")
    page.click("main button", "Enable time to live")
    page.text_in("main button", "Disable time to live")
    assert ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"] == {
        "TimeToLiveStatus": "ENABLED", "AttributeName": "expires"}
    page.click("main button", "Disable stream")
    page.text_in("main button", "Enable stream")
    assert not ddb.describe_table(TableName=name)["Table"].get("StreamSpecification", {}).get("StreamEnabled")
    page.shot("settings")


def test_console_by_keyboard(browser: Any, console_server: ServerProcess, tmp_path: Path) -> None:
    """The header's links are reached with (Shift+)Tab and followed with Enter; the new page's heading takes the
    focus."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    page = Page(browser, tmp_path / "screenshots")
    browser.get(console_server.endpoint + "/console")
    page.heading("Tables")
    page.text_in("main a.button", "Create table")  # (loaded)
    assert not page.css("#sign-out").is_displayed()  # (no credentials given, none to forget)
    for _ in range(10):  # back from the focused heading, through the header (however long the table list)
        ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()
        if browser.switch_to.active_element.text == "PartiQL":
            break
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    page.heading("PartiQL")
    page.wait.until(lambda d: d.switch_to.active_element.tag_name == "h1")
    page.assert_labelled()


def test_a_late_answer_does_not_draw_over_the_next_page(browser: Any, console_server: ServerProcess,
                                                         tmp_path: Path) -> None:
    """Leaving the tables page while its DescribeTable calls are still out: their answers are dropped, and the
    page the user went to stays."""
    ddb: Any = make_client(console_server.endpoint)
    for _ in range(3):
        ddb.create_table(TableName=unique_name("late"), BillingMode="PAY_PER_REQUEST",
                         AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                         KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
    page = Page(browser, tmp_path / "screenshots")
    browser.get(console_server.endpoint + "/console#/tables")
    browser.execute_script("location.hash = '#/partiql'")
    page.heading("PartiQL")
    time.sleep(1)  # (longer than the tables page takes to load here)
    assert browser.find_element("css selector", "h1").text == "PartiQL"
    assert browser.find_elements("css selector", "main table caption") == []
    assert browser.find_element("css selector", "#status").text == ""


def test_console_shows_the_advisor(browser: Any, tmp_path: Path) -> None:
    """The advisor's page lists a table's findings (Scans on the hot path, a large item) with their evidence, links
    each to its table and to a query of the key it names, and shows the observed access patterns; a table's own
    advisor view keeps to it."""
    server = ServerProcess(None, "--advisor", "on")
    try:
        ddb: Any = make_client(server.endpoint)
        name, other = unique_name("advised"), unique_name("quiet")
        for table in (name, other):
            ddb.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                             AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                             KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
        ddb.put_item(TableName=name, Item={"pk": {"S": "big"}, "body": {"S": "x" * 120_000}})
        for _ in range(5):
            ddb.scan(TableName=name)
        page = Page(browser, tmp_path / "screenshots")
        browser.get(server.endpoint + "/console#/advisor")
        page.heading("Advisor")
        page.text_in('[data-testid="advisor-summary"]', "findings over")
        assert page.text_in('tr[data-rule="scan-hot-path"]', name).text.startswith("Error")
        large = page.text_in('tr[data-rule="item-large"]', name)
        assert "Query big" in large.text
        page.text_in("table.patterns tbody tr", "Scan")
        page.assert_labelled()
        page.shot("advisor")
        large.find_element("css selector", "a.key").click()  # the key's link: a query of its partition, run
        page.heading(f"Query {name}")
        page.text_in('[data-testid="counts"]', "1 item returned")
        page.click("nav.subnav a", "Advisor")  # the table's own advisor view
        page.heading(f"Advisor: {name}")
        page.text_in('tr[data-rule="scan-hot-path"]', name)
        rows = browser.find_elements("css selector", "table.findings tbody tr, table.patterns tbody tr")
        assert rows and all(other not in row.text for row in rows)
        page.text_in('tr[data-rule="scan-hot-path"] a', name).click()
        page.heading(f"Table {name}")
        page.shot("advisor-table")
    finally:
        server.finish()


def test_console_charts_a_tables_metrics(browser: Any, console_server: ServerProcess, tmp_path: Path) -> None:
    """A table's Metrics tab charts its throughput and latency per minute from CloudWatch's figures on the server's
    port, and after Contributor Insights is enabled from the page, its partition heat map shows the key read most."""
    ddb: Any = make_client(console_server.endpoint)
    name = unique_name("charted")
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
    for i in range(10):
        ddb.put_item(TableName=name, Item={"pk": {"S": f"k{i}"}})
    page = Page(browser, tmp_path / "screenshots")
    browser.get(console_server.endpoint + f"/console#/metrics/{name}")
    page.heading(f"Metrics of {name}")
    page.text_in("figure figcaption", "Throughput (capacity units per minute)")
    page.text_in("figure figcaption", "Latency (ms, average per minute)")
    turns = itertools.count()

    def drawn_until(check: Any) -> None:
        """Once the page is drawn, draw it again (the figures reach the history within a second or two) until
        `check` holds."""
        def again(driver: Any) -> bool:
            if driver.find_elements("xpath", "//main/p[text()='Loading…']"):
                return False  # (still drawing: a new draw now would drop this one's answers)
            if check(driver):
                return True
            driver.execute_script("location.hash = arguments[0]", f"#/metrics/{name}/{(900, 3600)[next(turns) % 2]}")
            return False
        page.wait.until(again)

    # Ten 1-unit writes, in one minute or across two: the write units column adds up to 10.
    drawn_until(lambda driver: driver.execute_script(
        "const rows = document.querySelectorAll('[data-testid=\"data-Throughput\"] tbody tr');"
        "return [...rows].reduce((sum, row) => sum + (Number(row.cells[2].textContent) || 0), 0) === 10"))
    page.click("main button", "Enable Contributor Insights")
    page.text_in("#status", f"Contributor Insights enabled on {name}")
    assert ddb.describe_contributor_insights(TableName=name)["ContributorInsightsStatus"] == "ENABLED"

    def hottest(driver: Any) -> bool:
        # (reads go on while the page is drawn again: insights count a table's keys from when the server has seen
        # them enabled, a moment after the call)
        for _ in range(5):
            ddb.get_item(TableName=name, Key={"pk": {"S": "k3"}})
        ddb.get_item(TableName=name, Key={"pk": {"S": "k4"}})
        rows = driver.find_elements("css selector", '[data-testid="heat-keys"] tbody tr')
        return bool(rows) and rows[0].text.startswith("k3")
    drawn_until(hottest)
    page.assert_labelled()
    page.shot("metrics")
