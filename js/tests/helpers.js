import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "tests", "explorer", "fixtures");

/** A view-model fixture shared with the Python tests (tests/explorer/fixtures/). */
export function loadFixture(name) {
  return JSON.parse(readFileSync(path.join(fixtures, `${name}.json`), "utf8"));
}

export const FIXTURES = ["two_layer_rnn", "gru", "lstm", "stacked_2000"];
