#!/bin/bash
# rich 200K (first 200K of /tmp/rich1m/w), main (5c4a029) and the branch (git archive of 4dd774b), alternated
M=/tmp/boundload46/main-tree; B=/tmp/boundload46/br2; W=/tmp/boundload46/rich200k
/tmp/boundload46/one.sh main $M $W /tmp/boundload46/s-r-main-1
/tmp/boundload46/one.sh branch2 $B $W /tmp/boundload46/s-r-branch2-1
/tmp/boundload46/one.sh branch2 $B $W /tmp/boundload46/s-r-branch2-2
/tmp/boundload46/one.sh main $M $W /tmp/boundload46/s-r-main-2
