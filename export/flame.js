// memtl's HTML report: the flame graph of the bytes alive at each device's
// peak (devices[i].flame in the data block: the folded stacks of memtl peak
// --format folded), drawn as positioned <div>s under the section's
// .flame-frames, the root on top. Names from the trace are set as text
// (textContent), never as markup. Runs after report.js, whose data and
// helpers it uses; window.memtlFlame exposes the graphs to the browser tests.
(function () {
  'use strict';
  var report = window.memtlReport;
  var data = report.data;
  var ROW = 18;         // px per row of frames
  var MIN_WIDTH = 1;    // px: narrower frames (and all under them) are not drawn
  var MIN_LABEL = 40;   // px: narrower frames have no label (an ellipsis and a letter)
  var graphs = {};
  window.memtlFlame = {graphs: graphs};

  // The tree of a device's stacks: a node per frame, children merged by
  // name, largest first; x is a node's offset in bytes from the root's left.
  function build(flame) {
    var root = {name: 'all', bytes: 0, cats: [0, 0, 0, 0, 0, 0, 0, 0], children: [],
                parent: null, depth: 0, x: 0, index: new Map()};
    flame.stacks.forEach(function (s) {
      var bytes = s[0], cat = s[1], node = root;
      root.bytes += bytes;
      root.cats[cat] += bytes;
      s[2].forEach(function (f) {
        var name = flame.names[f], child = node.index.get(name);
        if (!child) {
          child = {name: name, bytes: 0, cats: [0, 0, 0, 0, 0, 0, 0, 0], children: [],
                   parent: node, depth: node.depth + 1, x: 0, index: new Map()};
          node.index.set(name, child);
          node.children.push(child);
        }
        child.bytes += bytes;
        child.cats[cat] += bytes;
        node = child;
      });
    });
    var nodes = [], height = 0;
    (function place(n) {
      n.id = nodes.length;
      nodes.push(n);
      height = Math.max(height, n.depth + 1);
      n.children.sort(function (a, b) {
        return b.bytes - a.bytes || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
      });
      var x = n.x;
      n.children.forEach(function (c) {
        c.x = x;
        x += c.bytes;
        place(c);
      });
    })(root);
    return {root: root, nodes: nodes, height: height};
  }

  // The category a frame is coloured by: its largest (a leaf has one).
  function mainCategory(n) {
    var best = 0;
    n.cats.forEach(function (b, i) {
      if (b > n.cats[best]) best = i;
    });
    return best;
  }

  // The category's colour at `alpha` over white, as the chart fills its
  // areas (fillAlpha 0.7), and a text colour that reads on it.
  function colours(hex, alpha) {
    var rgb = [1, 3, 5].map(function (i) {
      return Math.round(255 - alpha * (255 - parseInt(hex.substr(i, 2), 16)));
    });
    var light = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2] > 145;
    return ['rgb(' + rgb.join(',') + ')', light ? '#111' : '#fff'];
  }

  function pathOf(n) {
    var names = [];
    for (var a = n; a.parent; a = a.parent) names.unshift(a.name);
    return names;
  }

  // The frame's details: name, bytes, share of the peak, category (or
  // categories, largest first), and its stack.
  function describe(g, n) {
    var info = g.info;
    info.textContent = '';
    info.setAttribute('data-bytes', n.bytes);
    info.setAttribute('data-name', n.name);
    function line(cls, text, bold) {
      var d = document.createElement('div');
      d.className = cls;
      if (bold) {
        var b = document.createElement('b');
        b.textContent = bold;
        d.appendChild(b);
      }
      d.appendChild(document.createTextNode(text));
      info.appendChild(d);
    }
    var share = g.tree.root.bytes > 0 ? (100 * n.bytes / g.tree.root.bytes).toFixed(1) : '0.0';
    line('flame-name', '', n.name === '' ? '(no name)' : n.name);
    line('flame-bytes', ' (' + n.bytes.toLocaleString('en-US') + ' bytes), ' + share +
         '% of the peak', report.human(n.bytes));
    var cats = [];
    n.cats.forEach(function (b, i) {
      if (b > 0) cats.push([b, i]);
    });
    cats.sort(function (a, b) { return b[0] - a[0]; });
    line('flame-cats', cats.map(function (c) {
      return report.label(data.categories[c[1]]) +
             (cats.length > 1 ? ' ' + report.human(c[0]) : '');
    }).join(', '), cats.length > 1 ? 'categories: ' : 'category: ');
    var path = pathOf(n);
    if (path.length > 1) line('flame-path', path.join(' \u203a '));
  }

  function hint(g) {
    g.info.textContent = '';
    g.info.removeAttribute('data-bytes');
    g.info.removeAttribute('data-name');
    var d = document.createElement('div');
    d.className = 'hint';
    d.textContent = 'Hover or focus a frame for its bytes; click one to zoom to it.';
    g.info.appendChild(d);
  }

  // Draws the frames of zoom root g.zoom across the box's width, with its
  // ancestors above it at full width.
  function render(g) {
    var box = g.frames, width = box.clientWidth;
    box.textContent = '';
    if (!width) return;  // hidden: drawn when shown
    var z = g.zoom, scale = z.bytes > 0 ? width / z.bytes : 0;
    var deepest = z.depth;
    function draw(n, left, w) {
      var div = document.createElement('div');
      var leaf = n.children.length === 0;
      var c = colours(data.colors[mainCategory(n)], leaf ? 0.7 : 0.35);
      // Padding and border would make a narrow frame wider than its bytes.
      div.className = 'fr' + (n === z ? ' zoom' : '') + (n.depth < z.depth ? ' above' : '') +
                      (w < MIN_LABEL ? ' thin' : '') + (w < 3 ? ' hair' : '');
      div.style.left = left + 'px';
      div.style.width = w + 'px';
      div.style.top = n.depth * ROW + 'px';
      div.style.background = c[0];
      div.style.color = c[1];
      div.setAttribute('data-id', n.id);
      div.setAttribute('data-bytes', n.bytes);
      div.tabIndex = 0;
      div.setAttribute('role', 'button');
      div.setAttribute('aria-label', (n.name || '(no name)') + ', ' + report.human(n.bytes));
      if (w >= MIN_LABEL) div.textContent = n.name;
      box.appendChild(div);
      deepest = Math.max(deepest, n.depth);
    }
    for (var a = z.parent; a; a = a.parent) draw(a, 0, width);
    (function walk(n) {
      var w = (n.bytes * scale);
      if (w < MIN_WIDTH) return;
      draw(n, (n.x - z.x) * scale, w);
      n.children.forEach(walk);
    })(z);
    box.style.height = (deepest + 1) * ROW + 'px';
    g.reset.disabled = z === g.tree.root;
  }

  function zoom(g, n) {
    g.zoom = n;
    render(g);
    describe(g, n);
  }

  function make(index) {
    var dev = data.devices[index];
    var section = document.getElementById('device-' + index);
    var el = section && section.querySelector('.flame');
    if (!el || !dev.flame) return null;
    var g = {tree: build(dev.flame), frames: el.querySelector('.flame-frames'),
             info: el.querySelector('.flame-info'), reset: el.querySelector('.flame-reset')};
    g.zoom = g.tree.root;
    function nodeOf(e) {
      var div = e.target.closest && e.target.closest('.fr');
      return div ? g.tree.nodes[Number(div.getAttribute('data-id'))] : null;
    }
    function over(e) {
      var n = nodeOf(e);
      if (n) describe(g, n);
    }
    g.frames.addEventListener('mouseover', over);
    g.frames.addEventListener('focusin', over);
    // Leaving the graph shows the zoom root again (or the hint).
    g.frames.addEventListener('mouseleave', function () {
      if (g.zoom === g.tree.root) hint(g); else describe(g, g.zoom);
    });
    // A frame zooms to it; the zoom root zooms out a level, an ancestor to it.
    function choose(n) {
      var id = n.id;
      zoom(g, n === g.zoom && n.parent ? n.parent : n);
      var again = g.frames.querySelector('.fr[data-id="' + id + '"]');
      if (again) again.focus();
    }
    g.frames.addEventListener('click', function (e) {
      var n = nodeOf(e);
      if (n) choose(n);
    });
    g.frames.addEventListener('keydown', function (e) {
      var n = nodeOf(e);
      if (n && (e.key === 'Enter' || e.key === ' ')) {
        e.preventDefault();
        choose(n);
      } else if (e.key === 'Escape') {
        zoom(g, g.tree.root);
      }
    });
    g.reset.addEventListener('click', function () {
      zoom(g, g.tree.root);
    });
    g.zoomTo = function (n) { zoom(g, n); };
    g.render = function () { render(g); };
    hint(g);
    return g;
  }

  // The shown device's graph, made the first time it is shown.
  function show(index) {
    if (!data.devices[index]) return;
    if (!graphs[index]) graphs[index] = make(index);
    if (graphs[index]) render(graphs[index]);
  }

  var select = document.getElementById('device');
  if (select) {
    select.addEventListener('change', function () {
      show(Number(select.value));
    });
  }
  window.addEventListener('resize', function () {
    Object.keys(graphs).forEach(function (k) {
      if (graphs[k]) graphs[k].render();
    });
  });
  if (data.devices.length) show(data.selected);
})();
