// memtl's HTML report: the interactive chart of each device (dygraphs), the
// device selector and the sortable tables. Embedded into every report with
// its data (the #memtl-data JSON that html_export.cpp writes); it loads
// nothing. window.memtlReport exposes the charts to the browser tests, and
// the data and helpers to flame.js, which runs after it.
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('memtl-data').textContent);
  var UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  var charts = {};
  window.memtlReport = {data: data, charts: charts, human: human, label: label};

  // Bytes as memtl prints them (HumanBytes in core/explain/peak.cpp).
  function human(b) {
    var v = b, u = 0;
    while ((v >= 1024 || v <= -1024) && u < 4) {
      v /= 1024;
      ++u;
    }
    return u === 0 ? v.toFixed(0) + ' B' : v.toFixed(1) + ' ' + UNITS[u];
  }

  // A category's name as shown: "(inferred)" after it where the trace
  // records no tensors (data.inferred), unknown aside.
  function label(name) {
    return data.inferred && name !== 'unknown' ? name + ' (inferred)' : name;
  }

  // The allocator's reserved total at `us` (dev.reserved: [us, bytes] where
  // it changes); null before its first point or where the trace has none.
  function reservedAt(dev, us) {
    var r = dev.reserved, v = null;
    for (var i = 0; r && i < r.length && r[i][0] <= us; ++i) v = r[i][1];
    return v;
  }

  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c];
    });
  }

  // Y ticks at round numbers of one binary unit (the one of the largest
  // value shown), so the axis reads 0, 16 MiB, 32 MiB, ... rather than
  // decimal steps of bytes.
  function byteTicks(min, max, pixels) {
    var top = Math.max(Math.abs(min), Math.abs(max), 1);
    var u = 0;
    while (top >= 1024 && u < 4) {
      top /= 1024;
      ++u;
    }
    var scale = Math.pow(1024, u);
    var want = Math.max(2, Math.floor(pixels / 50));
    var raw = (max - min) / scale / want;
    var mag = Math.pow(10, Math.floor(Math.log10(raw > 0 ? raw : 1)));
    var step = mag;
    [1, 2, 2.5, 5, 10].some(function (m) {
      step = m * mag;
      return raw <= step;
    });
    var ticks = [];
    for (var v = Math.ceil(min / scale / step) * step; v <= max / scale + 1e-9; v += step) {
      var text = Number(v.toPrecision(6)) + ' ' + UNITS[u];
      ticks.push({v: v * scale, label: text});
    }
    return ticks;
  }

  // The legend: the hovered point's time, the op running then, and each
  // category's bytes, top of the stack first (data-bytes holds the exact
  // number, which the .json export has at that time).
  function legend(dev, g) {
    var row = g.getSelection();
    if (row < 0) {
      return '<span class="hint">Hover the chart to read each category\'s bytes and the op ' +
             'running then; drag to zoom, double-click to zoom out.</span>';
    }
    var vis = g.visibility().slice().reverse();  // by category
    var html = '<div class="when" data-us="' + (dev.first_us + dev.t[row]) + '">' +
               (dev.t[row] / 1000).toFixed(3) + ' ms</div>';
    var op = dev.op[row] >= 0 ? dev.ops[dev.op[row]] : null;
    html += '<div class="op">' + (op ? 'op: <b>' + esc(op[0]) + '</b>' +
                                           (op[1] ? '<br>module: ' + esc(op[1]) : '') +
                                           '<br>phase: ' + esc(op[2])
                                     : 'op: (none known)') +
            '</div><table>';
    var total = 0;
    for (var i = data.categories.length - 1; i >= 0; --i) {
      var b = dev.v[row][i];
      total += vis[i] ? b : 0;
      html += '<tr class="cat' + (vis[i] ? '' : ' off') + '" data-category="' +
              data.categories[i] + '" data-bytes="' + b + '"><td><span class="sw" style="background:' +
              data.colors[i] + '"></span>' + esc(label(data.categories[i])) +
              '</td><td class="n">' + human(b) + '</td></tr>';
    }
    html += '<tr class="total" data-bytes="' + total + '"><td><b>shown</b></td><td class="n"><b>' +
            human(total) + '</b></td></tr>';
    var reserved = reservedAt(dev, dev.t[row]);
    if (reserved !== null) {
      html += '<tr class="reserved" data-bytes="' + reserved + '"><td>reserved (allocator)</td>' +
              '<td class="n">' + human(reserved) + '</td></tr>';
    }
    return html + '</table>';
  }

  // The peak and step markers over the chart, placed after every redraw.
  function placeMarkers(dev, wrap, g) {
    var area = g.getArea();
    var range = g.xAxisRange();
    wrap.querySelectorAll('.marker').forEach(function (m) {
      var x = Number(m.getAttribute('data-x'));
      var inside = x >= range[0] && x <= range[1];
      m.style.display = inside ? '' : 'none';
      if (!inside) return;
      var px = g.toDomXCoord(x);
      m.style.left = px + 'px';
      // Near the right edge the label goes to the line's left.
      m.classList.toggle('flip', px > area.x + area.w - 160);
      m.style.top = area.y + 'px';
      m.style.height = area.h + 'px';
    });
    var steps = Array.prototype.filter.call(wrap.querySelectorAll('.marker.step'), function (m) {
      return m.style.display !== 'none';
    });
    var peak = wrap.querySelector('.marker.peak');
    var peakX = peak && peak.style.display !== 'none' ? parseFloat(peak.style.left) : null;
    // The peak's label, in the row above the steps' labels, goes to the
    // side of its line that no step's line crosses, where it can.
    if (peakX !== null) {
      var span = peak.querySelector('span').getBoundingClientRect().width + 3;
      var crossed = function (from, to) {
        return steps.some(function (m) {
          var x = parseFloat(m.style.left);
          return x >= from && x <= to;
        });
      };
      var flip = peak.classList.contains('flip');
      var here = flip ? crossed(peakX - span, peakX) : crossed(peakX, peakX + span);
      var there = flip ? crossed(peakX, peakX + span) || peakX + span > area.x + area.w
                       : crossed(peakX - span, peakX) || peakX - span < area.x;
      if (here && !there) peak.classList.toggle('flip', !flip);
    }
    // A step's label ends before the next step's line (or the plot's
    // edge): shortened with an ellipsis, hidden when too little is left
    // (the hover names the step). It never flips to the line's left, where
    // the previous step's label is. The peak's line, which runs through
    // the labels' row, is an edge too: the label ends before it, or starts
    // after it where that leaves more of the label. The 10 px: the label's
    // offset, padding and a gap.
    steps.forEach(function (m, i) {
      var label = m.querySelector('span');
      m.classList.remove('flip');
      label.style.left = '';
      label.style.maxWidth = 'none';
      label.style.display = '';
      var x = parseFloat(m.style.left);
      var end = i + 1 < steps.length ? parseFloat(steps[i + 1].style.left) : area.x + area.w;
      var room = end - x - 10;
      if (peakX !== null && peakX > x + 1 && peakX < end) {
        var want = label.getBoundingClientRect().width - 4;  // its text, without the padding
        var before = peakX - x - 10;
        var after = end - peakX - 12;  // past the line's 2 px
        if (before < want && Math.min(after, want) > before) {
          label.style.left = peakX - x + 5 + 'px';
          room = after;
        } else {
          room = before;
        }
      }
      label.style.maxWidth = Math.max(room, 0) + 'px';
      label.style.display = room < 24 ? 'none' : '';
    });
  }

  function addMarker(wrap, cls, x, text) {
    var m = document.createElement('div');
    m.className = 'marker ' + cls;
    m.setAttribute('data-x', x);
    var s = document.createElement('span');
    s.textContent = text;
    m.appendChild(s);
    wrap.appendChild(m);
  }

  function makeChart(index) {
    var dev = data.devices[index];
    var section = document.getElementById('device-' + index);
    var box = section.querySelector('.chart-box');
    if (!box || typeof Dygraph === 'undefined' || charts[index]) return;
    var wrap = box.querySelector('.chart-wrap');
    // dygraphs stacks its last series at the bottom: the series are the
    // categories in reverse, so that PARAMETER lies at the bottom as in the
    // image. Series s is category n - 1 - s.
    var n = data.categories.length;
    var rows = dev.t.map(function (t, k) {
      return [t / 1000].concat(dev.v[k].slice().reverse());
    });
    var last = dev.t.length ? dev.t[dev.t.length - 1] / 1000 : 0;
    addMarker(wrap, 'peak', dev.peak.us / 1000, 'peak ' + human(dev.peak.bytes));
    // A step runs from its start to the next one's: one that began before
    // the device's first point but is still running then is marked at 0.
    data.steps.forEach(function (s, i) {
      var x = (s[1] - dev.first_us) / 1000;
      var next = i + 1 < data.steps.length ? (data.steps[i + 1][1] - dev.first_us) / 1000 : Infinity;
      if (x <= last && next > 0) addMarker(wrap, 'step', Math.max(x, 0), s[0]);
    });
    // The allocator's reserved total is a line of its own over the stack,
    // not a category: drawn under the areas as steps, and the y range
    // made to hold it.
    var options = {};
    if (dev.reserved && dev.reserved.length) {
      var top = 0;
      dev.v.forEach(function (v) {
        top = Math.max(top, v.reduce(function (a, b) { return a + b; }, 0));
      });
      dev.reserved.forEach(function (p) {
        top = Math.max(top, p[1]);
      });
      options.valueRange = [0, top * 1.05];
      options.underlayCallback = function (ctx, area, graph) {
        var r = dev.reserved;
        ctx.save();
        ctx.strokeStyle = '#000';
        ctx.lineWidth = 1.5;
        ctx.beginPath();
        for (var i = 0; i < r.length; ++i) {
          var end = i + 1 < r.length ? r[i + 1][0] : Math.max(r[i][0], dev.t[dev.t.length - 1]);
          var a = graph.toDomCoords(r[i][0] / 1000, r[i][1]);
          var b = graph.toDomCoords(end / 1000, r[i][1]);
          if (i === 0) ctx.moveTo(a[0], a[1]); else ctx.lineTo(a[0], a[1]);
          ctx.lineTo(b[0], b[1]);
        }
        ctx.stroke();
        ctx.restore();
      };
    }
    var g = new Dygraph(wrap.querySelector('.chart'), rows, Object.assign(options, {
      labels: ['ms'].concat(data.categories.slice().reverse()),
      colors: data.colors.slice().reverse(),
      stackedGraph: true,
      fillGraph: true,
      fillAlpha: 0.7,
      stepPlot: true,
      strokeWidth: 1,
      highlightCircleSize: 3,
      legend: 'always',
      labelsDiv: box.querySelector('.legend'),
      legendFormatter: function () {
        return legend(dev, this);
      },
      xlabel: 'ms since the first point',
      axes: {
        x: {valueFormatter: function (ms) { return ms.toFixed(3) + ' ms'; }},
        y: {ticker: byteTicks, axisLabelWidth: 80, valueFormatter: human},
      },
      drawCallback: function (graph) {
        placeMarkers(dev, wrap, graph);
      },
    }));
    charts[index] = g;
    // A toggle per category: hiding one restacks the others.
    var toggles = box.querySelector('.toggles');
    data.categories.forEach(function (name, i) {
      var toggle = document.createElement('label');
      toggle.innerHTML = '<input type="checkbox" checked data-category="' + name +
                         '"> <span class="sw" style="background:' + data.colors[i] + '"></span>' +
                         esc(label(name));
      toggle.querySelector('input').addEventListener('change', function (e) {
        g.setVisibility(n - 1 - i, e.target.checked);
      });
      toggles.appendChild(toggle);
    });
    var reset = document.createElement('button');
    reset.type = 'button';
    reset.textContent = 'Zoom out';
    reset.addEventListener('click', function () {
      g.resetZoom();
    });
    toggles.appendChild(reset);
  }

  function showDevice(index) {
    document.querySelectorAll('section.device').forEach(function (s) {
      s.hidden = s.id !== 'device-' + index;
    });
    var name = data.devices[index].name;
    document.querySelectorAll('.device-name').forEach(function (e) {
      e.textContent = name;
    });
    document.title = 'memtl memory timeline: ' + name + ' (' + data.source + ')';
    makeChart(index);
  }

  // Click a column's header to sort by it (numbers largest first, then
  // toggling; text A to Z).
  function sortBy(table, col, th) {
    var numeric = th.classList.contains('n');
    var was = th.getAttribute('aria-sort');
    var asc = was ? was === 'descending' : !numeric;
    var rows = Array.prototype.slice.call(table.tBodies[0].rows);
    function key(r) {
      var c = r.cells[col];
      if (!numeric) return c.textContent;
      var v = c.getAttribute('data-v');
      if (v !== null) return Number(v);
      var m = /^(-?[\d.]+) (B|KiB|MiB|GiB|TiB)$/.exec(c.textContent.trim());
      return m ? Number(m[1]) * Math.pow(1024, UNITS.indexOf(m[2])) : 0;
    }
    rows.sort(function (a, b) {
      var x = key(a), y = key(b);
      var d = numeric ? x - y : x < y ? -1 : x > y ? 1 : 0;
      return asc ? d : -d;
    });
    Array.prototype.forEach.call(th.parentNode.cells, function (h) {
      h.removeAttribute('aria-sort');
    });
    th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
    rows.forEach(function (r) {
      table.tBodies[0].appendChild(r);
    });
  }

  document.querySelectorAll('table.sortable').forEach(function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.addEventListener('click', function () {
        sortBy(table, col, th);
      });
    });
  });
  var select = document.getElementById('device');
  if (select) {
    select.addEventListener('change', function () {
      showDevice(Number(select.value));
    });
  }
  if (data.devices.length) showDevice(data.selected);
})();
