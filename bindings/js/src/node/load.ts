// Loading the wasm core in Node, from the package's own file: imported for its effect by
// every Node entry point (the library's and each CLI command's).
import { readFileSync } from "node:fs";

import { loadWasmSync } from "../wasm.js";

loadWasmSync(readFileSync(new URL("../../wasm/tether_bg.wasm", import.meta.url)));
