"""The run report rendered from a known dump, its command, and the readers of make run's dump."""

from __future__ import annotations

import json
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image
import pytest

from local import report_cli
from local.report import DPI, FIG_SIZE
from local.report_data import figures
from local.run_dump import load_dump, read_checkpoint, with_checkpoints
from tests.local.report_fixture import SHARD, T0, dump, ms

INSTANCES = ("orders-ap-northeast-2", "payments-ap-northeast-2")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHARTS = ("batch-duration", "latency", "source-lag", "rates", "failures")


class _Page(HTMLParser):
    """The images (src, alt) and table cells of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[tuple[str, str]] = []
        self.cells: list[str] = []
        self._in_cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "img":
            self.images.append((found.get("src") or "", found.get("alt") or ""))
        self._in_cell = tag == "td"

    def handle_endtag(self, tag: str) -> None:
        self._in_cell = False

    def handle_data(self, data: str) -> None:
        if self._in_cell:
            self.cells.append(data)


def _write(tmp: Path, raw: object) -> Path:
    path = tmp / "metrics.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, _Page]:
    """The two-instance fixture dump rendered by ``python -m local.report_cli``."""
    tmp = tmp_path_factory.mktemp("report")
    out = tmp / "out"
    assert (
        report_cli.main(["--metrics", str(_write(tmp, dump(*INSTANCES))), "--out", str(out)]) == 0
    )
    page = _Page()
    page.feed((out / "index.html").read_text(encoding="utf-8"))
    return out, page


def test_every_chart_is_a_non_empty_png(rendered: tuple[Path, _Page]) -> None:
    out, page = rendered
    expected = {f"{i}-{c}.png" for i in INSTANCES for c in CHARTS}
    assert {src for src, _ in page.images} == expected
    for src, _ in page.images:
        data = (out / src).read_bytes()
        assert data.startswith(PNG_SIGNATURE), src
        pixels = matplotlib.image.imread(out / src)
        assert pixels.shape[:2] == (FIG_SIZE[1] * DPI, FIG_SIZE[0] * DPI), src
        assert float(pixels[..., :3].std()) > 0.05, f"{src} is blank"


def test_the_page_shows_the_runs_own_numbers(rendered: tuple[Path, _Page]) -> None:
    _, page = rendered
    for instance in INSTANCES:
        by_chart = {
            slug: alt
            for src, alt in page.images
            for slug in CHARTS
            if src == f"{instance}-{slug}.png"
        }
        assert set(by_chart) == set(CHARTS)
        assert instance in by_chart["batch-duration"]
        assert (
            "4 batches measured, p50 1,500 ms, max 12,000 ms, trigger 2,000 ms"
            in (by_chart["batch-duration"])
        )
        assert "2 slower than the trigger" in by_chart["batch-duration"]
        assert (
            "max 15,000 ms over 3 batches with records, alarm at 20,000 ms" in by_chart["latency"]
        )
        assert "at most 5 records waiting, the oldest for 22,000 ms" in by_chart["source-lag"]
        assert (
            "input max 800 rows/s, processed max 333 rows/s, 2,800 input rows" in by_chart["rates"]
        )
        assert "malformed_json=30, not_utf8=20; total 50" in by_chart["failures"]
    cells = page.cells
    # figures table: committed batches from the checkpoint, failures per reason
    assert cells[cells.index("batches committed (checkpoint)") + 1] == "2"
    assert cells[cells.index("malformed_json") + 1] == "30"
    assert cells[cells.index("not_utf8") + 1] == "20"
    assert cells[cells.index("total") + 1] == "50"


def _checkpoint(root: Path, batches: int, committed: int) -> Path:
    offsets, commits = root / "offsets", root / "commits"
    offsets.mkdir(parents=True)
    commits.mkdir()
    for n in range(batches):
        (offsets / str(n)).write_text(
            "v1\n"
            f'{{"batchWatermarkMs":0,"batchTimestampMs":{ms(n * 2):.0f}}}\n'
            f'{{"shards": {{"{SHARD}": {{"after": "{n + 1}", "ts": null, "done": false}}}}}}\n',
            encoding="utf-8",
        )
    for n in range(committed):
        (commits / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}\n', encoding="utf-8")
    return root


def test_checkpoint_batches_replace_the_dumps(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path / "cp", batches=6, committed=5)
    loaded = load_dump(_write(tmp_path, dump(*INSTANCES)))
    replaced = with_checkpoints(loaded, [(INSTANCES[1], checkpoint)])
    assert figures(replaced.runs[1]).batches_committed == 5
    assert replaced.runs[0] == loaded.runs[0]
    one = load_dump(_write(tmp_path, dump(INSTANCES[0])))
    assert len(with_checkpoints(one, [(None, checkpoint)]).runs[0].batches) == 6


def test_read_checkpoint(tmp_path: Path) -> None:
    batches = read_checkpoint(_checkpoint(tmp_path, batches=3, committed=2))
    assert [(b.batch_id, b.committed) for b in batches] == [(0, True), (1, True), (2, False)]
    assert batches[2].planned_at == T0 + timedelta(seconds=4)
    assert batches[2].shards is not None and batches[2].shards[SHARD].after == "3"


@pytest.mark.parametrize(
    "case",
    [
        ("absent.json", None, "absent.json: No such file"),
        ("metrics.json", f"{INSTANCES[0]}=empty", "checkpoint empty: no offsets/ directory"),
        ("metrics.json", "other-r=cp", "--checkpoint other-r=cp: no instance 'other-r'"),
        ("metrics.json", "cp", "the dump has 2 instances"),
    ],
)
def test_command_errors_name_what_is_wrong(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: tuple[str, str | None, str],
) -> None:
    metrics, checkpoint, message = case
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, dump(*INSTANCES))
    (tmp_path / "empty").mkdir()
    _checkpoint(tmp_path / "cp", batches=1, committed=1)
    extra = ["--checkpoint", checkpoint] if checkpoint else []
    code = report_cli.main(["--metrics", metrics, *extra, "--out", "o"])
    assert code == report_cli.EXIT_USAGE
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_bad_dump_names_the_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = dump()
    raw["instances"][0]["trigger_interval_sec"] = 0
    metrics = _write(tmp_path, raw)
    assert report_cli.main(["--metrics", str(metrics), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"metrics dump {metrics}: instances[0].trigger_interval_sec" in err
