import { familyBudget } from '../budget.js';

familyBudget('network');
