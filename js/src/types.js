// @ts-check
/**
 * Types shared by the front end.
 *
 * `WidgetTraits` mirrors the synced traitlets of `Explorer` in etp_viz/explorer/widget.py;
 * keep the two in step (names, shapes, defaults). `ViewModel` mirrors docs/view-model.md.
 */

/**
 * @typedef {object} WidgetTraits  Synced traits of etp_viz/explorer/widget.py `Explorer`.
 * @property {ViewModel | null} view_model  the view model (docs/view-model.md), read-only in JS
 * @property {string[]} expanded  ids of expanded sub-jaxpr clusters (JS and Python write)
 * @property {Selection} selected  what the user selected (JS writes; Python via select())
 * @property {Selection} highlight  what is highlighted (JS and Python write)
 * @property {Options} options  validated display options (Python writes)
 * @property {string} error  an error from Python, shown in the widget ("" when none)
 * @property {LivePanelSpec[]} live_panels  live panels (issue 6 fills these), data by buffers
 */

/**
 * @typedef {object} Selection
 * @property {"node"|"cluster"|"edge"|"weight"|"group"|"diagnostic"|"relation"|"nodes"} [kind]
 * @property {string} [id]
 * @property {string[]} [node_ids]  for kind "nodes"
 */

/**
 * @typedef {object} Options
 * @property {number} [height]  widget height in px
 * @property {"TB"|"LR"} [rankdir]
 * @property {number} [large_graph_threshold]  visible nodes above which layout is bounded
 * @property {boolean} [show_params]  draw param nodes (otherwise badges only)
 * @property {string[]} [panels]  which side panels to show
 */

/**
 * @typedef {object} LivePanelSpec
 * @property {string} name
 * @property {"line"|"heatmap"|"bars"} kind
 * @property {string} [title]
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
 * @property {string} kind  subjaxpr | group
 * @property {string} label
 * @property {string | null} parent
 * @property {boolean} [collapsed]
 */

/**
 * @typedef {object} ViewModel
 * @property {number} schema
 * @property {string} [title]
 * @property {VMNode[]} nodes
 * @property {VMEdge[]} edges
 * @property {VMCluster[]} [clusters]
 * @property {any[]} [weights]
 * @property {any[]} [groups]
 * @property {any[]} [relations]
 * @property {any[]} [readouts]
 * @property {any[]} [perturbations]
 * @property {any[]} [diagnostics]
 * @property {{key: string, label: string}[]} [legend]
 */

export {};
