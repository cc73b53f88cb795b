"""Annotation spreadsheets: the sample as CSV and XLSX out, filled CSV or XLSX sheets back in."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

SAMPLE_SHEET = "sample"
RUBRIC_SHEET = "rubric"
_WIDE = {"question": 40, "statement": 50, "correct_evidence": 60, "text": 80, "notes": 30}


def write_sample(sheet: pd.DataFrame, folder: Path, rubric: str, rating_columns: list[str]) -> tuple[Path, Path]:
    """<folder>/human_eval_sample.csv and .xlsx (the XLSX with a rubric tab and 0-2 drop-downs)."""
    from openpyxl import Workbook
    from openpyxl.styles import Alignment, Font
    from openpyxl.utils import get_column_letter
    from openpyxl.worksheet.datavalidation import DataValidation

    folder.mkdir(parents=True, exist_ok=True)
    csv_path, xlsx_path = folder / "human_eval_sample.csv", folder / "human_eval_sample.xlsx"
    sheet.to_csv(csv_path, index=False, encoding="utf-8-sig")  # the BOM lets Excel read UTF-8

    book = Workbook()
    table = book.active
    table.title = SAMPLE_SHEET
    columns = list(sheet.columns)
    table.append(columns)
    for record in sheet.itertuples(index=False):
        table.append([None if value == "" else value for value in record])
    for cell in table[1]:
        cell.font = Font(bold=True)
    table.freeze_panes = "B2"
    choices = DataValidation(type="list", formula1='"0,1,2,n/a"', allow_blank=True,
                             error="Ratings are 0, 1 or 2 (n/a: not applicable)")
    table.add_data_validation(choices)
    for index, name in enumerate(columns, start=1):
        letter = get_column_letter(index)
        table.column_dimensions[letter].width = _WIDE.get(name, 14)
        if name in _WIDE:
            for cell in table[letter][1:]:
                cell.alignment = Alignment(wrap_text=True, vertical="top")
        if name in rating_columns and len(sheet):
            choices.add(f"{letter}2:{letter}{len(sheet) + 1}")
    guide = book.create_sheet(RUBRIC_SHEET)
    guide.column_dimensions["A"].width = 120
    for line in rubric.splitlines():
        guide.append([line])
    book.save(xlsx_path)
    return csv_path, xlsx_path


def read_sheet(path: Path) -> pd.DataFrame:
    """A filled sample sheet, every cell as text (empty cells as "")."""
    if not path.is_file():
        raise FileNotFoundError(f"no such sheet: {path}")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    elif suffix in (".xlsx", ".xlsm"):
        frame = pd.read_excel(path, sheet_name=SAMPLE_SHEET, dtype=str, keep_default_na=False)
    else:
        raise ValueError(f"{path.name}: a sample sheet is .csv or .xlsx")
    return frame.fillna("")
