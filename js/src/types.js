// @ts-check
/**
 * Types shared by the front end.
 *
 * `WidgetTraits` mirrors the synced traitlets of `Explorer` in etp_viz/explorer/widget.py;
 * keep the two in step (names, shapes, defaults). `ViewModel` mirrors docs/view-model.md
 * and etp_viz/view/types.py.
 */

/**
 * @typedef {object} WidgetTraits  Every synced trait of the Python widgets, in one place:
 *   etp_viz/explorer/widget.py `Explorer` (view_shell … live_panels) and
 *   etp_viz/explorer/live_explorer.py `LiveExplorer(Explorer)` (live_status). `live_history` is not a
 *   trait: LiveExplorer.frontend_state() adds it to the state a saved page embeds
 *   (etp_viz/explorer/export.py), and the live region reads it with model.get() like a trait.
 *   tests/explorer/test_widget_traits.py checks this list against the Python classes.
 * @property {ViewModel | null} view_shell  the view model (docs/view-model.md) or, for a big one, its
 *   shell (`parts` set: node records and weight cards held back, asked for with `view_part`
 *   requests, ./parts.js); Python keeps the full `view_model` (not synced). Read-only in JS
 * @property {import("./parts.js").Parts | null} [view_parts]  saved pages only (not synced): every
 *   part of a shell, embedded by `Explorer.frontend_state()` (no kernel to ask)
 * @property {string[]} expanded  ids of expanded sub-jaxpr / module clusters (JS and Python write)
 * @property {Selection} selected  what the user selected (JS writes; Python via select())
 * @property {Selection} highlight  what is highlighted (JS and Python write)
 * @property {Options} options  validated display options (Python writes)
 * @property {number} scale  text size factor of the page, 0.5-3 (Python writes; the A-/A+ buttons too)
 * @property {string} error  an error from Python, shown in the widget ("" when none)
 * @property {any} [verification]  the last `verify()` report (`VerifyReport.to_json()`: `rows` per
 *   weight leaf with `path, claim, cosine, relative_error, contradiction`), null until verified
 * @property {Record<string, any[]>} what_if_changes  the "What if…" changes offered per weight path,
 *   `[{id, label, change, title, disabled}]` (Python writes: etp_viz/explorer/whatif_offers.py)
 * @property {any} what_if  the last what-if run from the inspector (`run_offer`: `weight, id, label,
 *   change, diff, before, after, graphs_html, error`), null when closed (Python writes; JS clears)
 * @property {LivePanelSpec[]} live_panels  declared live panels (data comes by binary buffers in
 *   `{type: "live", name, shape, dtype}` custom messages); [] on a static explorer
 * @property {LiveStatus} [live_status]  live.py only: the session state (Python writes)
 * @property {LiveHistory | null} [live_history]  saved pages only (not synced): the recorded
 *   history, `History.to_json()`, drawn statically when no kernel is there
 */

/**
 * @typedef {object} LiveStatus  `LiveExplorer.live_status` (etp_viz/explorer/live_explorer.py `_update_status`).
 * @property {number} step
 * @property {boolean} running
 * @property {boolean} [halted]
 * @property {string} [device]
 * @property {string} [algorithm]  "d_rtrl" | "es_d_rtrl" | …
 * @property {Record<string, string | number | boolean | number[]>} [learner_options]  its options
 *   not at their defaults (`{feedback: "random"}`; etp_viz/learn/knobs.py `learner_options`)
 * @property {number | null} [decay]  ES-D-RTRL alpha_x; null for other algorithms
 * @property {number} [steps_per_frame]
 * @property {string[] | null} [record]  series sent to the page (null: all)
 * @property {CompareRow[]} [compare]  compare mode only: one row per algorithm (the cost table)
 * @property {import("./live/knobs.js").KnobSlider[]} [knobs]  compare mode only: a slider per
 *   knob some learner takes (`_knob_sliders` in etp_viz/explorer/compare.py)
 */

/**
 * @typedef {object} CompareRow  one algorithm of compare mode (`Comparison.rows()` in
 *   etp_viz/live/compare.py); missing measurements are null
 * @property {string} algorithm
 * @property {number} step
 * @property {number | null} loss  mean loss of the last 50 steps
 * @property {number | null} cosine  mean fidelity cosine over its checkpoints
 * @property {number | null} rel_error
 * @property {number | null} ms_per_step  median wall time per step (compiles and fidelity replays excluded)
 * @property {number} state_bytes  bytes of the learner's own state (traces, influence, buffers)
 * @property {boolean} halted
 * @property {string | null} [failure]
 * @property {Record<string, number | number[]>} [knobs]  its knobs' values (`{decay: 0.9}`)
 */

/**
 * @typedef {object} LiveHistory  `History.to_json()` (etp_viz/live/history.py): non-finite values are null.
 * @property {number[]} steps
 * @property {Record<string, (number | null)[] | (number | null)[][]>} [metrics]
 * @property {{step: number, cosine: number | null, rel_error: number | null}[]} [fidelity]
 * @property {Record<string, any>} [meta]
 * @property {any} [failure]
 */

/**
 * @typedef {object} Selection
 * @property {"node"|"cluster"|"edge"|"weight"|"group"|"diagnostic"|"relation"|"nodes"} [kind]
 * @property {string} [id]
 * @property {string[]} [node_ids]  for kind "nodes"
 */

/**
 * @typedef {object} Options
 * @property {number} [height]  height of the graph area in px (a live run's panels come below it)
 * @property {"auto"|"light"|"dark"} [theme]  "auto" (default): JupyterLab's theme
 * @property {"auto"|"TB"|"LR"} [rankdir]  "auto" (default): left to right in a wide pane
 * @property {number} [large_graph_threshold]  visible nodes above which layout is bounded
 * @property {boolean} [show_params]  draw param nodes (otherwise badges only)
 * @property {string[]} [panels]  which side panels to show
 * @property {number} [level_layout_min_nodes]  drawn nodes above which the graph is laid out
 *   level by level (./graph.js LEVEL_LAYOUT_MIN_NODES); front end only, not a Python display
 *   option: set in the page's state by bench/explorer_render.py --flat
 */

/**
 * @typedef {object} LivePanelSpec
 * @property {string} name
 * @property {"line"|"heatmap"|"fidelity"|"bars"|"compare"} kind
 * @property {string} [title]
 * @property {string[]} [labels]  kind "compare": the algorithms, in the order of the data's
 *   first axis (`[k, m, 2]`: m rows of (step, value) per algorithm, NaN-padded)
 */

/**
 * @typedef {object} VMNode
 * @property {string} id
 * @property {string} kind  eqn | input | output | hidden_in | hidden_out | state_in | state_out | param | perturb
 * @property {string} label
 * @property {string | null} [primitive]
 * @property {number | null} [eqn_index]
 * @property {string | null} [cluster]
 * @property {boolean} [etp]
 * @property {string | null} [weight_path]
 * @property {string | null} [status]
 * @property {string | null} [hidden_path]
 * @property {string | null} [state_path]
 * @property {number | null} [group]
 * @property {Record<string, string>} [params]
 * @property {string[]} [in_avals]
 * @property {string[]} [out_avals]
 * @property {string | null} [source]
 * @property {{text: string, title?: string, kind?: string}[]} [badges]
 */

/**
 * @typedef {object} VMEdge
 * @property {string} id
 * @property {string} source
 * @property {string} target
 * @property {string} [var]
 * @property {string} [aval]
 */

/**
 * @typedef {object} VMCluster
 * @property {string} id
 * @property {string} kind  subjaxpr | branch | group | cell (| module: made by graph.js)
 * @property {string} label
 * @property {string | null} parent
 * @property {boolean} [collapsed]
 * @property {string | null} [module_path]  a cell: the module's path (etp_viz/view/cells.py)
 * @property {string | null} [class_name]  a cell: the module's class
 * @property {string[]} [ports]  a cell: its weights' paths
 * @property {string[]} [hidden_paths]  a cell: its hidden states' paths
 */

/** The view-model version this page renders: `SCHEMA_VERSION` in etp_viz/view/types.py (the
 * JSON's top-level `schema`; tests/view/test_view_model.py checks that the two agree). */
export const VIEW_MODEL_SCHEMA = 3;

/**
 * The view model, or an error naming both versions when it is of another version than this
 * page reads: a clear message in the widget instead of a page drawn from fields it lacks.
 * @param {any} vm
 * @returns {ViewModel | null}
 */
export function checkViewModel(vm) {
  if (vm && vm.schema !== VIEW_MODEL_SCHEMA) {
    throw new Error(`this page reads view models of version ${VIEW_MODEL_SCHEMA}, got version ${vm.schema ?? "(none)"}: `
      + "the etp_viz that made the view model and the explorer's front end differ; re-run the cell "
      + "(or reinstall etp_viz) so that both are the same version");
  }
  return vm || null;
}

/**
 * @typedef {object} ViewModel
 * @property {number} schema  the version (VIEW_MODEL_SCHEMA)
 * @property {string} [title]
 * @property {VMNode[]} nodes
 * @property {VMEdge[]} edges
 * @property {VMCluster[]} [clusters]
 * @property {any[]} [weights]  each with `status_text` (its status and claim in the reader's words:
 *   "online · approximate", computed in Python and shown as is) and `summary` (what they mean
 *   in plain words)
 * @property {any[]} [groups]
 * @property {any[]} [relations]
 * @property {any[]} [readouts]
 * @property {any[]} [bypasses]
 * @property {any[]} [perturbations]
 * @property {any[]} [diagnostics]
 * @property {{nodes: string[], weights: string[]} | null} [parts]  a shell only: the node fields
 *   every node keeps (unless null or false) and the weight fields held back (./parts.js)
 * @property {import("./legend.js").LegendEntry[]} [legend]  every legend entry (etp_viz/view/palette.py
 *   LEGEND): key, label, plain-language title, swatch, fill, stroke, line; the page shows those
 *   of what it draws (./legend.js)
 * @property {Record<string, string>} [palette]  colour name -> "#rrggbb" (palette.py COLOURS):
 *   what the graph is drawn with (./graph.js COLORS are the same defaults)
 */

export {};
