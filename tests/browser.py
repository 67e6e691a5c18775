"""A tiny Chrome DevTools Protocol driver for tests: the system Chromium, headless, driven over
aiohttp's websocket client.

    async with Browser.start(tmp_path) as browser:
        await browser.goto(url)
        text = await browser.text("#samples")
        await browser.type_into("input[name=q]", "needle")
        async with browser.navigation():
            await browser.press_enter()
        png = await browser.screenshot()

:func:`find_chromium` is None where no Chromium is installed; tests skip then.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import itertools
import json
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

WIDTH, HEIGHT = 1280, 900
_LISTENING = re.compile(rb"DevTools listening on (ws://\S+)")


def find_chromium() -> str | None:
    """The system Chromium (or Chrome) binary, or None."""
    names = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
    return next((path for name in names if (path := shutil.which(name))), None)


class Browser:
    """One headless Chromium page, commands sent and events read over its websocket."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        session: aiohttp.ClientSession,
        socket: aiohttp.ClientWebSocketResponse,
    ) -> None:
        self._process, self._session, self._socket = process, session, socket
        self._ids = itertools.count(1)
        self._replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._loads: asyncio.Queue[None] = asyncio.Queue()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    @contextlib.asynccontextmanager
    async def start(cls, profile: Path, timeout: float = 20.0) -> AsyncIterator[Browser]:
        """Chromium with a fresh profile in ``profile``, on one blank page; closed on exit."""
        binary = find_chromium()
        assert binary, "no chromium binary (tests skip with find_chromium() first)"
        process = await asyncio.create_subprocess_exec(
            binary, "--headless=new", "--remote-debugging-port=0", f"--user-data-dir={profile}",
            "--no-sandbox", "--no-first-run", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-extensions", "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        session = aiohttp.ClientSession()
        browser = drain = None
        try:
            endpoint = await asyncio.wait_for(_endpoint(process), timeout)
            drain = asyncio.create_task(process.stderr.read())  # so a full pipe never blocks it
            http = endpoint.replace("ws://", "http://").split("/devtools/")[0]
            async with session.get(f"{http}/json/list") as response:
                targets = await response.json(content_type=None)
            page = next(t for t in targets if t.get("type") == "page")
            socket = await session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
            browser = cls(process, session, socket)
            await browser.send("Page.enable")
            await browser.send("Runtime.enable")
            await browser.send(  # the window's frame takes some of --window-size
                "Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT,
                deviceScaleFactor=1, mobile=False,
            )  # fmt: skip
            yield browser
        finally:
            if browser is not None:
                await browser._close()
            await session.close()
            if process.returncode is None:
                process.kill()
            await process.wait()
            if drain is not None:
                await drain

    async def _close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        await self._socket.close()

    async def _read(self) -> None:
        async for message in self._socket:
            if message.type != aiohttp.WSMsgType.TEXT:
                break
            data = json.loads(message.data)
            if "id" in data and (reply := self._replies.pop(data["id"], None)) is not None:
                reply.set_result(data)
            elif data.get("method") == "Page.loadEventFired":
                self._loads.put_nowait(None)
        for reply in self._replies.values():
            reply.set_exception(ConnectionError("the browser closed its connection"))

    async def send(self, method: str, timeout: float = 15.0, **params: Any) -> dict[str, Any]:
        """Send one command; its result (an error reply raises RuntimeError)."""
        number = next(self._ids)
        reply = self._replies[number] = asyncio.get_running_loop().create_future()
        await self._socket.send_str(json.dumps({"id": number, "method": method, "params": params}))
        data = await asyncio.wait_for(reply, timeout)
        if "error" in data:
            raise RuntimeError(f"{method}: {data['error'].get('message')}")
        return data.get("result", {})

    @contextlib.asynccontextmanager
    async def navigation(self, timeout: float = 15.0) -> AsyncIterator[None]:
        """Wait, after the block, for the page it navigated to to finish loading."""
        while not self._loads.empty():
            self._loads.get_nowait()
        yield
        await asyncio.wait_for(self._loads.get(), timeout)

    async def goto(self, url: str) -> None:
        async with self.navigation():
            result = await self.send("Page.navigate", url=url)
            if result.get("errorText"):
                raise RuntimeError(f"{url}: {result['errorText']}")

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    async def text(self, selector: str = "body") -> str:
        """The rendered text of the first element ``selector`` matches ('' if none does)."""
        found = await self.evaluate(
            f"(e => e ? e.innerText : '')(document.querySelector({json.dumps(selector)}))"
        )
        return str(found)

    async def click(self, selector: str) -> None:
        """A real mouse click in the middle of the element (scrolled into view first)."""
        box = await self.evaluate(
            f"(e => {{ e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect();"
            f" return [r.x + r.width / 2, r.y + r.height / 2]; }})"
            f"(document.querySelector({json.dumps(selector)}))"
        )
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            await self.send(
                "Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1
            )

    async def type_into(self, selector: str, text: str) -> None:
        """Focus the field and type ``text`` into it, as a keyboard would."""
        await self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        await self.send("Input.insertText", text=text)

    async def press_enter(self) -> None:
        for kind in ("keyDown", "keyUp"):
            await self.send(
                "Input.dispatchKeyEvent", type=kind, key="Enter", code="Enter",
                windowsVirtualKeyCode=13, text="\r" if kind == "keyDown" else "",
            )  # fmt: skip

    async def choose(self, selector: str, value: str) -> None:
        """Pick ``value`` in a ``<select>`` (a native drop-down cannot be clicked headless)."""
        await self.evaluate(
            f"(e => {{ e.value = {json.dumps(value)}; e.dispatchEvent(new Event('change')); }})"
            f"(document.querySelector({json.dumps(selector)}))"
        )

    async def screenshot(self) -> bytes:
        """The visible page as PNG bytes."""
        result = await self.send("Page.captureScreenshot", format="png")
        return base64.b64decode(result["data"])


async def window(browser: Browser, width: int) -> None:
    """Make the window ``width`` pixels wide."""
    await browser.send(
        "Emulation.setDeviceMetricsOverride", width=width, height=HEIGHT, deviceScaleFactor=1,
        mobile=False,
    )  # fmt: skip


def check_screenshot(png: bytes) -> None:
    """A whole PNG of the window that shows something: many colours, not one."""
    from PIL import Image

    image = Image.open(io.BytesIO(png))
    image.load()
    assert image.size == (WIDTH, HEIGHT)
    colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 20  # None: more colours than that


async def _endpoint(process: asyncio.subprocess.Process) -> str:
    """The browser's websocket address, from the line Chromium writes on stderr."""
    assert process.stderr is not None
    while line := await process.stderr.readline():
        if match := _LISTENING.search(line):
            return match[1].decode()
    raise RuntimeError(f"chromium exited ({await process.wait()}) before listening")
